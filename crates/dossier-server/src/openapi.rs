//! `GET /openapi.json`: every route with the schema of each of its responses.
//!
//! The engine's and the agent's JSON types derive their schemas (their crates' `openapi`
//! feature), so the document describes exactly what is serialised; the integration test
//! `tests/openapi.rs` validates real responses against it. [`document`] merges this
//! module's [`ApiDoc`] with the `…Api` of every other route module.

use std::borrow::Cow;

use axum::Json;
use dossier_agent::AskResponse;
use dossier_engine::{EntityReport, SearchResponse, SubgraphJson};
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, Schema};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

use crate::error::ErrorBody;
use crate::routes::{self, AskBody, DateQuery, Health, SearchBody};

#[derive(OpenApi)]
#[openapi(
    info(title = "Dossier API", description = "Scoped search, ask and graph over a Dossier store. The caller is the principal bound to the API key."),
    paths(routes::healthz, routes::readyz, routes::search, routes::ask, routes::graph_entity, routes::graph_neighbors, routes::graph_evidence, routes::graph_path, routes::record, crate::traces::trace),
    components(schemas(
        SearchBody, AskBody, DateQuery, Health, ErrorBody,
        SearchResult, AskResult, EntityResult, SubgraphResult, SearchDegraded,
        routes::NeighborsQuery, routes::EvidenceBody, routes::RecordResult, crate::traces::TraceRecord, crate::jobs::JobInfo,
        // What the document, review and trace routes return, by their own names.
        dossier_engine::DocumentInfo, dossier_engine::SectionView, dossier_engine::IngestReport,
        dossier_engine::review::ReviewItem, dossier_core::review::Decision,
        dossier_agent::Trace
    )),
    modifiers(&ApiKeyAuth)
)]
pub struct ApiDoc;

/// The served document: [`ApiDoc`] and the paths and schemas of every route module.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.merge(crate::documents::DocumentsApi::openapi());
    doc.merge(crate::admin::AdminApi::openapi());
    doc.merge(crate::review::ReviewApi::openapi());
    doc.merge(crate::chat::ChatApi::openapi());
    doc.merge(crate::audit::AuditApi::openapi());
    query_parameters_in_query(&mut doc);
    idempotency_key_on_writes(&mut doc);
    doc
}

/// Every write operation (see [`crate::idempotency::is_write`]) takes the optional
/// `Idempotency-Key` header and may answer 400 (a malformed key), 409 (the same write
/// still running) and 422 (the key was another write's).
fn idempotency_key_on_writes(doc: &mut utoipa::openapi::OpenApi) {
    use crate::idempotency::{is_write, MAX_KEY_LEN};
    use axum::http::Method;
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::{ContentBuilder, Required, ResponseBuilder};
    let header = ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Makes the write safe to retry: sent again with the same key by the same principal, \
             it is answered with the first success's response (header `Idempotent-Replayed: true`) \
             instead of running twice. Kept 24 hours; 1 to 255 visible ASCII characters.",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(MAX_KEY_LEN))
                .pattern(Some("^[!-~]+$")),
        ))
        .build();
    let error = |what: &str| {
        ResponseBuilder::new()
            .description(what)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(reference::<ErrorBody>()))
                    .build(),
            )
            .build()
    };
    for (path, item) in doc.paths.paths.iter_mut() {
        let operations = [
            (Method::POST, &mut item.post),
            (Method::PUT, &mut item.put),
            (Method::DELETE, &mut item.delete),
            (Method::PATCH, &mut item.patch),
        ];
        for (method, op) in operations {
            let Some(op) = op.as_mut().filter(|_| is_write(&method, path)) else {
                continue;
            };
            op.parameters
                .get_or_insert_with(Vec::new)
                .push(header.clone());
            for (status, what) in [
                ("400", "Bad input, such as a malformed Idempotency-Key"),
                ("409", "A write with this Idempotency-Key is still running (retry after `Retry-After`)"),
                ("422", "The Idempotency-Key was used for a different request"),
            ] {
                op.responses
                    .responses
                    .entry(status.to_string())
                    .or_insert_with(|| error(what).into());
            }
        }
    }
}

/// utoipa places the fields of an `IntoParams` struct without
/// `#[into_params(parameter_in = Query)]` in the path; a parameter that the path
/// template does not name can only be a query parameter, and it is required only when
/// its schema does not admit null (an `Option` field is optional).
fn query_parameters_in_query(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::{SchemaType, Type};
    use utoipa::openapi::Required;
    for (path, item) in doc.paths.paths.iter_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.head,
            &mut item.options,
            &mut item.trace,
        ];
        for op in operations.into_iter().flatten() {
            for p in op.parameters.iter_mut().flatten() {
                if p.parameter_in != ParameterIn::Path || path.contains(&format!("{{{}}}", p.name))
                {
                    continue;
                }
                p.parameter_in = ParameterIn::Query;
                let nullable = match &p.schema {
                    Some(RefOr::T(Schema::Object(o))) => match &o.schema_type {
                        SchemaType::Array(types) => types.contains(&Type::Null),
                        SchemaType::Type(t) => *t == Type::Null,
                        SchemaType::AnyValue => true,
                    },
                    _ => false,
                };
                if nullable {
                    p.required = Required::False;
                }
            }
        }
    }
}

struct ApiKeyAuth;

impl Modify for ApiKeyAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

fn reference<T: ToSchema>() -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(T::name()))
}

/// Registers `T` and everything it refers to.
fn register<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}

/// Declares a route's response name as another name for an engine or agent type, so
/// that the paths keep their names and the schema is the type's own.
macro_rules! alias_schema {
    ($name:ident, $target:ty, $desc:literal) => {
        #[doc = $desc]
        pub struct $name;
        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                AllOfBuilder::new()
                    .item(reference::<$target>())
                    .description(Some($desc))
                    .into()
            }
        }
        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
            fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
                register::<$target>(schemas);
            }
        }
    };
}

alias_schema!(
    AskResult,
    AskResponse,
    "What `dossier ask --json` prints: status (answered, partial, insufficient_evidence, unavailable), answer, citations, conflicts, gaps, facts and the trace."
);
alias_schema!(
    SubgraphResult,
    SubgraphJson,
    "A subgraph of the caller's view: nodes (id, name, kind) and edges (from, relation, to, provenance)."
);
alias_schema!(
    EntityResult,
    EntityReport,
    "An entity of the caller's graph view: id, name, kind, aliases, sources and edges (each with provenance). Identical to `dossier graph entity --json`."
);

/// Set when a search ran past its deadline and BM25 answered instead.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SearchDegraded {
    /// The mode asked for.
    pub from: String,
    /// The mode that answered (`bm25`).
    pub to: String,
    pub reason: String,
}

/// `dossier_engine::SearchResponse` (what `dossier search --json` prints), plus
/// `degraded` when the deadline made BM25 answer.
pub struct SearchResult;

impl PartialSchema for SearchResult {
    fn schema() -> RefOr<Schema> {
        AllOfBuilder::new()
            .item(reference::<SearchResponse>())
            .item(
                ObjectBuilder::new().property("degraded", reference::<SearchDegraded>()),
            )
            .description(Some(
                "What `dossier search --json` prints: hits (each citing doc_id, version, section, source_uri), conflicts (at most 20, with `conflicts_total` counting them all), and for graph modes the evidence subgraph and community reports; `degraded` when the search ran past its deadline and BM25 answered instead.",
            ))
            .into()
    }
}

impl ToSchema for SearchResult {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("SearchResult")
    }
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        register::<SearchResponse>(schemas);
        register::<SearchDegraded>(schemas);
    }
}

pub fn router() -> axum::Router<crate::AppState> {
    axum::Router::new().route("/openapi.json", axum::routing::get(openapi_json))
}

pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    static DOC: std::sync::OnceLock<utoipa::openapi::OpenApi> = std::sync::OnceLock::new();
    Json(DOC.get_or_init(document).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_structs_are_optional_query_parameters() {
        let doc = serde_json::to_value(document()).unwrap();
        let params = &doc["paths"]["/v1/graph/neighbors/{name}"]["get"]["parameters"];
        let find = |n: &str| {
            params
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == n)
                .cloned()
                .unwrap_or_else(|| panic!("{n} missing: {params}"))
        };
        assert_eq!(find("name")["in"], "path");
        assert_eq!(find("name")["required"], true);
        for q in ["hops", "now", "as_of"] {
            assert_eq!(find(q)["in"], "query", "{q}");
            assert_eq!(find(q)["required"], false, "{q}");
        }
    }

    #[test]
    fn the_route_names_refer_to_the_real_types() {
        let doc = serde_json::to_value(document()).unwrap();
        let schemas = &doc["components"]["schemas"];
        for (alias, target) in [
            ("AskResult", "AskResponse"),
            ("EntityResult", "EntityReport"),
            ("SubgraphResult", "SubgraphJson"),
        ] {
            assert_eq!(
                schemas[alias]["allOf"][0]["$ref"],
                format!("#/components/schemas/{target}")
            );
            assert!(schemas[target]["properties"].is_object(), "{target}");
        }
        assert_eq!(
            schemas["SearchResult"]["allOf"][0]["$ref"],
            "#/components/schemas/SearchResponse"
        );
        // `Option` with `skip_serializing_if` is not required; plain fields are.
        let required = &schemas["SearchResponse"]["required"];
        assert_eq!(
            required,
            &serde_json::json!(["hits", "conflicts", "conflicts_total"])
        );
    }
}
