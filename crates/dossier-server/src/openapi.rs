//! `GET /openapi.json`: the routes and the server's own schemas. Engine and agent
//! responses are described as free-form objects (their shape is the CLI's `--json`).

use axum::Json;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::RefOr;
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

use crate::error::ErrorBody;
use crate::routes::{self, AskBody, GraphQuery, Health, SearchBody};

#[derive(OpenApi)]
#[openapi(
    info(title = "Dossier API", description = "Scoped search, ask and graph over a Dossier store. The caller is the principal bound to the API key."),
    paths(routes::healthz, routes::readyz, routes::search, routes::ask, routes::graph_entity, routes::graph_neighbors, routes::graph_evidence, crate::traces::trace),
    components(schemas(SearchBody, AskBody, GraphQuery, Health, ErrorBody, SearchResult, AskResult, EntityResult, SubgraphResult, routes::NeighborsQuery, routes::EvidenceBody, crate::traces::TraceRecord, crate::jobs::JobInfo)),
    modifiers(&ApiKeyAuth)
)]
pub struct ApiDoc;

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

fn free_form(description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
        .into()
}

macro_rules! free_form_schema {
    ($name:ident, $desc:literal) => {
        #[doc = $desc]
        pub struct $name;
        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                free_form($desc)
            }
        }
        impl ToSchema for $name {}
    };
}

free_form_schema!(
    SearchResult,
    "dossier_engine::SearchResponse: hits (each citing doc_id, version, section, source_uri), conflicts, and for graph modes the evidence subgraph and community reports. Identical to `dossier search --json`."
);
free_form_schema!(
    AskResult,
    "dossier_agent::AskResponse: status (answered, partial, insufficient_evidence, unavailable), answer, citations, conflicts, gaps, facts and the trace. Identical to `dossier ask --json`."
);
free_form_schema!(
    SubgraphResult,
    "A subgraph of the caller's view: nodes (id, name, kind) and edges (from, relation, to, provenance)."
);
free_form_schema!(
    EntityResult,
    "An entity of the caller's graph view: id, name, kind, aliases, sources and edges (each with provenance). Identical to `dossier graph entity --json`."
);

pub fn router() -> axum::Router<crate::AppState> {
    axum::Router::new().route("/openapi.json", axum::routing::get(openapi_json))
}

pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
