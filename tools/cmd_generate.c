/* dvm generate: a decoder LLM's tokens from prompts of text (through the
 * folder's tokenizer, dvm/tokenizer.h) or of token ids, through the
 * generator (dvm/generate.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define MAX_PROMPTS 256

static const char usage_text[] =
    "usage: dvm generate MODEL_DIR|MODEL.dvmb --prompt TEXT [--prompt ...] [options]\n"
    "       dvm generate MODEL_DIR|MODEL.dvmb --prompt-ids 1,2,3 [--prompt-ids ...] [options]\n"
    "  MODEL_DIR                a model folder as ONNX Runtime GenAI's builder writes it\n"
    "                           (genai_config.json, the ONNX file and its data), compiled once\n"
    "                           into a .dvmb beside the ONNX file; or a .dvmb compiled from one,\n"
    "                           with genai_config.json beside it\n"
    "  --prompt-ids IDS         one sequence's prompt, comma-separated token ids (repeat for a\n"
    "                           batch; the lengths may differ)\n"
    "  --prompt TEXT            one sequence's prompt as text, encoded with the folder's\n"
    "                           tokenizer.json (repeat for a batch)\n"
    "  --max-length N           tokens per sequence, prompt included (default: search.max_length)\n"
    "  --do-sample              sample instead of choosing the most likely token\n"
    "  --top-k K --top-p P --temperature T --repetition-penalty R --seed S\n"
    "                           sampling settings (default: genai_config.json's search)\n"
    "  --threads N              kernel threads (default: all cores)\n"
    "  --kv-dtype f32|f16       the KV cache's precision (default f32): f16 halves its bytes\n"
    "                           (an f32 model's keys and values rounded to f16)\n"
    "  --stats                  print prefill and decode tokens per second and the time to\n"
    "                           first token on stderr\n"
    "prints the new tokens of one sequence as they are made (text for --prompt, ids for\n"
    "--prompt-ids); of a batch, one line per sequence (\"N: text\" or \"N: ids\") as each is done\n";

static int parse_ids(const char *s, int32_t **out, int *n) {
  int cap = 1;
  for (const char *p = s; *p; p++) cap += *p == ',';
  int32_t *ids = malloc((size_t)cap * sizeof *ids);
  if (!ids) return 0;
  *n = 0;
  for (const char *p = s;; p++) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < INT32_MIN || v > INT32_MAX || (*end && *end != ',')) {
      free(ids);
      return 0;
    }
    ids[(*n)++] = (int32_t)v;
    if (!*end) break;
    p = end;
  }
  *out = ids;
  return 1;
}

static int number(const char *opt, const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !(v >= lo && v <= hi)) {
    dvm_cli_usage_error("generate", "%s %s: expected a number in [%g, %g]", opt, s, lo, hi);
    return 0;
  }
  *out = v;
  return 1;
}

static int newer(const char *a, const char *b) { /* a's mtime >= b's; 0 when a is missing */
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_mtime >= sb.st_mtime;
}

/* MODEL_DIR's compiled module: DIR/NAME.dvmb for DIR/NAME.onnx, compiled
 * unless it is newer than both the ONNX file and this dvm. */
static int compile_dir(const char *dir, const char *config, char *dvmb, size_t size) {
  char file[256], logits[256], onnx[PATH_MAX + 256];
  dvm_status *st = dvm_generator_model_file(config, file, logits, sizeof file);
  if (st) return dvm_cli_fail("generate", st);
  snprintf(onnx, sizeof onnx, "%s/%s", dir, file);
  size_t stem = strlen(onnx) > 5 && strcmp(onnx + strlen(onnx) - 5, ".onnx") == 0 ? strlen(onnx) - 5 : strlen(onnx);
  if (snprintf(dvmb, size, "%.*s.dvmb", (int)stem, onnx) >= (int)size)
    return dvm_cli_usage_error("generate", "%s: path too long", onnx);
  if (access(onnx, R_OK) != 0) return dvm_cli_usage_error("generate", "%s: %s", onnx, strerror(errno));
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = 0;
  if (newer(dvmb, onnx) && (!self[0] || newer(dvmb, self))) return -1;
  fprintf(stderr, "dvm generate: compiling %s to %s\n", onnx, dvmb);
  dvmc_compile_options co;
  dvmc_compile_options_init(&co);
  co.last_position = logits; /* the generator reads no other row */
  st = dvm_cli_compile(onnx, dvmb, 0, &co);
  return st ? dvm_cli_fail("generate", st) : -1;
}

typedef struct {
  double prefill_s, first_s, decode_s;
  long prompt_tokens, decoded;
} timing;

/* What is printed: each sequence's tokens up to shown[b]; printed[b]:
 * whether its line (a batch) or anything (one sequence) was. With a
 * tokenizer, text instead of ids. */
typedef struct {
  const dvm_tokenizer *tok;  /* NULL: ids */
  dvm_tokenizer_stream *stream; /* one sequence's text as it is made */
  int *shown, *printed, *prompt_len;
} output;

static void put_text(const char *s, size_t n) {
  fwrite(s, 1, n, stdout);
  fflush(stdout);
}

/* Prints what is new (one sequence: as made; a batch: each sequence's
 * line once it is done). */
static dvm_status *show(const dvm_generator *g, output *o) {
  int B = dvm_generator_batch_size(g);
  dvm_status *st = NULL;
  for (int b = 0; b < B && !st; b++) {
    int len;
    const int32_t *seq = dvm_generator_sequence(g, b, &len);
    if (B == 1) {
      for (; o->shown[b] < len && !st; o->shown[b]++) {
        const char *text;
        size_t n;
        if (!o->tok) printf("%s%d", o->printed[b]++ ? " " : "", seq[o->shown[b]]);
        else if (!(st = dvm_tokenizer_stream_put(o->stream, seq[o->shown[b]], &text, &n))) put_text(text, n), o->printed[b] = 1;
      }
      fflush(stdout);
    } else if (dvm_generator_seq_done(g, b) && !o->printed[b]) {
      printf("%d:", b);
      if (o->tok) {
        char *text;
        size_t n;
        st = dvm_tokenizer_decode(o->tok, seq + o->prompt_len[b], (size_t)(len - o->prompt_len[b]), 1, &text, &n);
        if (!st) printf(" "), put_text(text, n), free(text);
      }
      for (; !o->tok && o->shown[b] < len; o->shown[b]++) printf(" %d", seq[o->shown[b]]);
      printf("\n");
      o->printed[b] = 1;
      fflush(stdout);
    }
  }
  return st;
}

static dvm_status *generate(dvm_generator *g, int32_t **prompts, int *lens, output *o, timing *t) {
  int B = dvm_generator_batch_size(g);
  dvm_status *st = dvm_generator_append(g, (const int32_t *const *)prompts, lens);
  for (int b = 0; b < B; b++) o->shown[b] = lens[b], t->prompt_tokens += lens[b];
  double t0 = dvm_cli_now();
  if (!st) st = dvm_generator_compute_logits(g);
  t->prefill_s = dvm_cli_now() - t0;
  for (int step = 0; !st && !dvm_generator_done(g); step++) {
    double t1 = dvm_cli_now();
    st = dvm_generator_next(g);
    if (step == 0) t->first_s = dvm_cli_now() - t0;
    else t->decode_s += dvm_cli_now() - t1, t->decoded++;
    if (!st) st = show(g, o);
  }
  if (!st && o->stream) { /* what the last tokens left incomplete */
    const char *text;
    size_t n;
    if (!(st = dvm_tokenizer_stream_finish(o->stream, &text, &n)) && n) put_text(text, n), o->printed[0] = 1;
  }
  if (B == 1 && o->printed[0]) printf("\n");
  return st;
}

/* The ids of each text prompt, with the special tokens the tokenizer adds. */
static dvm_status *encode_prompts(const dvm_tokenizer *tok, char **texts, int n, int32_t **prompts, int *lens) {
  for (int i = 0; i < n; i++) {
    size_t len;
    dvm_status *st = dvm_tokenizer_encode(tok, texts[i], strlen(texts[i]), 1, &prompts[i], &len);
    if (st) return dvm_status_annotate(st, "--prompt %d", i);
    if (len > INT_MAX) return dvm_status_new(DVM_INVALID_ARGUMENT, "--prompt %d: too long", i);
    lens[i] = (int)len;
  }
  return NULL;
}

int dvm_cmd_generate(int argc, char **argv) {
  static const struct option opts[] = {
      {"prompt-ids", required_argument, 0, 'i'}, {"prompt", required_argument, 0, 'P'},
      {"max-length", required_argument, 0, 'm'}, {"do-sample", no_argument, 0, 's'},
      {"top-k", required_argument, 0, 'k'}, {"top-p", required_argument, 0, 'p'},
      {"temperature", required_argument, 0, 't'}, {"repetition-penalty", required_argument, 0, 'r'},
      {"seed", required_argument, 0, 'S'}, {"threads", required_argument, 0, 'T'},
      {"kv-dtype", required_argument, 0, 'K'}, {"stats", no_argument, 0, 'x'}, {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int32_t *prompts[MAX_PROMPTS] = {0};
  char *texts[MAX_PROMPTS];
  int lens[MAX_PROMPTS], n = 0, n_text = 0, stats = 0, rc = DVM_EXIT_USAGE;
  dvm_tokenizer *tok = NULL;
  dvm_generator_options go;
  dvm_generator_options_init(&go);
  double x;
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
    switch (c) {
    case 'i':
      if (n == MAX_PROMPTS) {
        dvm_cli_usage_error("generate", "more than %d prompts", MAX_PROMPTS);
        goto done;
      }
      if (!parse_ids(optarg, &prompts[n], &lens[n])) {
        dvm_cli_usage_error("generate", "--prompt-ids %s: expected comma-separated token ids", optarg);
        goto done;
      }
      n++;
      break;
    case 'P':
      if (n_text == MAX_PROMPTS) {
        dvm_cli_usage_error("generate", "more than %d prompts", MAX_PROMPTS);
        goto done;
      }
      texts[n_text++] = optarg;
      break;
    case 'm': if (!number("--max-length", optarg, 1, 1 << 30, &x)) goto done; go.max_length = (int)x; break;
    case 's': go.do_sample = 1; break;
    case 'k': if (!number("--top-k", optarg, 0, 1 << 30, &x)) goto done; go.top_k = (int)x; break;
    case 'p': if (!number("--top-p", optarg, 0, 1, &x)) goto done; go.top_p = x; break;
    case 't': if (!number("--temperature", optarg, 1e-6, 1e6, &x)) goto done; go.temperature = x; break;
    case 'r': if (!number("--repetition-penalty", optarg, 1e-6, 1e6, &x)) goto done; go.repetition_penalty = x; break;
    case 'S': if (!number("--seed", optarg, 0, 9007199254740992.0, &x)) goto done; go.seed = (int64_t)x; break;
    case 'T': if (!number("--threads", optarg, 0, 4096, &x)) goto done; go.threads = (int)x; break;
    case 'K':
      if (strcmp(optarg, "f32") && strcmp(optarg, "f16")) {
        dvm_cli_usage_error("generate", "--kv-dtype %s: expected f32 or f16", optarg);
        goto done;
      }
      go.kv_dtype = optarg[1] == '1' ? DVM_F16 : DVM_F32;
      break;
    case 'x': stats = 1; break;
    case 'h': fputs(usage_text, stdout); rc = DVM_EXIT_OK; goto done;
    default: fputs(usage_text, stderr); goto done;
    }
  }
  if (n && n_text) {
    dvm_cli_usage_error("generate", "give --prompt or --prompt-ids, not both");
    goto done;
  }
  if (optind != argc - 1 || n + n_text == 0) {
    fputs(usage_text, stderr);
    goto done;
  }
  const char *model = argv[optind];
  char dir[PATH_MAX], config[PATH_MAX + 32], dvmb[PATH_MAX + 300];
  struct stat sb;
  int is_dir = stat(model, &sb) == 0 && S_ISDIR(sb.st_mode);
  const char *slash = strrchr(model, '/');
  snprintf(dir, sizeof dir, "%.*s", is_dir ? (int)strlen(model) : slash ? (int)(slash - model) : 1,
           is_dir || slash ? model : ".");
  snprintf(config, sizeof config, "%s/genai_config.json", dir);
  snprintf(dvmb, sizeof dvmb, "%s", model);
  dvm_status *st = NULL;
  if (n_text) { /* the tokenizer first: its errors come before compiling */
    st = dvm_tokenizer_load(dir, &tok);
    if (!st) st = encode_prompts(tok, texts, n_text, prompts, lens);
    n = n_text;
    if (st) {
      rc = dvm_cli_fail("generate", st);
      goto done;
    }
  }
  if (is_dir && (rc = compile_dir(dir, config, dvmb, sizeof dvmb)) >= 0) goto done;
  dvm_module *m = NULL;
  dvm_generator *g = NULL;
  go.batch_size = n;
  st = dvm_module_load_file(dvmb, NULL, &m);
  if (!st) st = dvm_generator_create(m, config, &go, &g);
  dvm_module_release(m);
  timing t = {0};
  output o = {tok, NULL, calloc(3 * (size_t)n, sizeof(int)), NULL, NULL};
  if (!st && !o.shown) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
  if (!st) {
    o.printed = o.shown + n, o.prompt_len = o.shown + 2 * n;
    memcpy(o.prompt_len, lens, (size_t)n * sizeof *lens);
  }
  if (!st && tok && n == 1) st = dvm_tokenizer_stream_create(tok, 1, &o.stream);
  if (!st) st = generate(g, prompts, lens, &o, &t);
  dvm_tokenizer_stream_free(o.stream);
  free(o.shown);
  dvm_generator_destroy(g);
  if (st) {
    rc = dvm_cli_fail("generate", st);
    goto done;
  }
  if (stats)
    fprintf(stderr, "prefill: %ld tokens in %.3f s (%.1f tokens/s)\ntime to first token: %.3f s\n"
                    "decode: %ld tokens in %.3f s (%.1f tokens/s)\n",
            t.prompt_tokens, t.prefill_s, t.prompt_tokens / (t.prefill_s > 0 ? t.prefill_s : 1e-9), t.first_s,
            t.decoded, t.decode_s, t.decoded / (t.decode_s > 0 ? t.decode_s : 1e-9));
  rc = fflush(stdout) == 0 && !ferror(stdout) ? DVM_EXIT_OK : DVM_EXIT_RUNTIME;
done:
  for (int i = 0; i < MAX_PROMPTS; i++) free(prompts[i]);
  dvm_tokenizer_free(tok);
  return rc;
}
