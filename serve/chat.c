/* Chat messages to a prompt. tokenizer_config.json's chat_template is a
 * Jinja program, which dvm does not run: it recognises the two forms most
 * decoder models publish and writes them itself, and refuses any other.
 *
 *   chatml  (Qwen2 and others): <|im_start|>ROLE\nCONTENT<|im_end|>\n per
 *           message, then <|im_start|>assistant\n; when the template has
 *           Qwen2's default system message and the first message is not a
 *           system one, that message first.
 *   llama2  ([INST] with <<SYS>>): BOS[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER
 *           [/INST] ASSISTANT EOS, then BOS[INST] ... for each turn.
 *   inst    (Mistral: [INST] without <<SYS>>): BOS[INST] USER [/INST]ASSISTANT
 *           EOS...; a system message is refused, as its template does.
 *   header  (Llama 3: <|start_header_id|>): BOS, then per message
 *           <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
 *           with CONTENT trimmed, then the assistant's header.
 *   tagged  (Phi-3: <|user|> and <|end|>): <|ROLE|>\nCONTENT<|end|>\n per
 *           message, then <|assistant|>\n; BOS first where the template
 *           writes bos_token.
 *   turn    (Gemma: <start_of_turn>): BOS, then per message
 *           <start_of_turn>ROLE\nCONTENT<end_of_turn>\n, the assistant's
 *           role written "model" and CONTENT trimmed, then
 *           <start_of_turn>model\n; user and assistant must alternate from
 *           the user, and a system message is refused, as its template
 *           raises. */
#include <jansson.h>
#include <string.h>

#include "serve.h"

static const char qwen_system[] = "You are a helpful assistant.";

/* A token setting: a string or {"content": string}. */
static void token_string(json_t *cfg, const char *key, char *out, size_t size, const char *dflt) {
  json_t *v = json_object_get(cfg, key);
  if (json_is_object(v)) v = json_object_get(v, "content");
  snprintf(out, size, "%s", json_is_string(v) ? json_string_value(v) : dflt);
}

void dvms_chat_read_config(dvms_model *m, const char *dir) {
  char path[1200];
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  json_error_t err;
  json_t *cfg = json_load_file(path, 0, &err);
  m->chat_template[0] = 0;
  token_string(cfg, "bos_token", m->bos, sizeof m->bos, "<s>");
  token_string(cfg, "eos_token", m->eos, sizeof m->eos, "</s>");
  json_t *t = json_object_get(cfg, "chat_template");
  const char *tmpl = json_is_string(t) ? json_string_value(t) : NULL;
  if (!cfg)
    snprintf(m->chat_error, sizeof m->chat_error, "the model has no readable tokenizer_config.json, so no chat template");
  else if (!tmpl)
    snprintf(m->chat_error, sizeof m->chat_error, "the model's tokenizer_config.json has no chat_template (a string)");
  else if (strstr(tmpl, "<|im_start|>") && strstr(tmpl, "<|im_end|>"))
    strcpy(m->chat_template, "chatml");
  else if (strstr(tmpl, "[INST]") && strstr(tmpl, "[/INST]"))
    strcpy(m->chat_template, strstr(tmpl, "<<SYS>>") ? "llama2" : "inst");
  else if (strstr(tmpl, "<|start_header_id|>") && strstr(tmpl, "<|eot_id|>"))
    strcpy(m->chat_template, "header");
  else if (strstr(tmpl, "<|user|>") && strstr(tmpl, "<|end|>"))
    strcpy(m->chat_template, strstr(tmpl, "bos_token") ? "tagged+bos" : "tagged");
  else if (strstr(tmpl, "<start_of_turn>") && strstr(tmpl, "<end_of_turn>"))
    strcpy(m->chat_template, "turn");
  else
    snprintf(m->chat_error, sizeof m->chat_error, "the model's chat_template is none of the forms dvm recognises "
             "(ChatML, [INST], Llama 3's headers, Phi-3's tags, Gemma's turns); use /v1/completions");
  if (tmpl && !strcmp(m->chat_template, "chatml") && strstr(tmpl, qwen_system)) strcat(m->chat_template, "+sys");
  json_decref(cfg);
}

/* A message's text: a string, or an array of {"type": "text", "text": ...} parts. */
static dvm_status *content(json_t *msg, size_t i, dvms_buf *out) {
  json_t *c = json_object_get(msg, "content");
  if (json_is_string(c)) {
    dvms_buf_put(out, json_string_value(c), json_string_length(c));
    return NULL;
  }
  size_t k;
  json_t *part;
  if (!json_is_array(c)) return dvm_status_new(DVM_INVALID_ARGUMENT, "messages[%zu].content: a string or an array of text parts expected", i);
  json_array_foreach(c, k, part) {
    json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
    if (!json_is_string(type) || strcmp(json_string_value(type), "text") != 0 || !json_is_string(text))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "messages[%zu].content[%zu]: only {\"type\": \"text\", \"text\": ...} parts "
                            "are supported", i, k);
    dvms_buf_put(out, json_string_value(text), json_string_length(text));
  }
  return NULL;
}

/* A message's content with the whitespace at its ends taken off (Jinja's
 * trim; ASCII whitespace). */
static dvm_status *trimmed(json_t *msg, size_t i, dvms_buf *out) {
  dvms_buf c = {0};
  dvm_status *st = content(msg, i, &c);
  size_t a = 0, b = c.len;
  while (a < b && strchr(" \t\n\r\f\v", c.data[a])) a++;
  while (b > a && strchr(" \t\n\r\f\v", c.data[b - 1])) b--;
  if (!st && b > a) dvms_buf_put(out, c.data + a, b - a);
  dvms_buf_free(&c);
  return st;
}

/* The header, tagged and turn forms: one block per message around its
 * content, then the assistant's opening. */
static dvm_status *blocks(const dvms_model *m, json_t *msgs, dvms_buf *out) {
  const char *t = m->chat_template;
  int header = !strcmp(t, "header"), turn = !strcmp(t, "turn");
  if (header || turn || strstr(t, "+bos")) dvms_buf_put(out, m->bos, strlen(m->bos));
  size_t i;
  json_t *msg;
  json_array_foreach(msgs, i, msg) {
    const char *role = json_string_value(json_object_get(msg, "role"));
    dvm_status *st = NULL;
    if (turn && (!strcmp(role, "system") || !strcmp(role, "user") != (i % 2 == 0)))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "messages[%zu]: %s", i, !strcmp(role, "system")
                            ? "a system message is not supported by this model's chat template (Gemma's)"
                            : "user and assistant must alternate, from the user, in this model's chat template");
    if (header) {
      dvms_buf_printf(out, "<|start_header_id|>%s<|end_header_id|>\n\n", role);
      st = trimmed(msg, i, out);
      dvms_buf_put(out, "<|eot_id|>", 10);
    } else if (turn) {
      dvms_buf_printf(out, "<start_of_turn>%s\n", strcmp(role, "assistant") ? role : "model");
      st = trimmed(msg, i, out);
      dvms_buf_put(out, "<end_of_turn>\n", 14);
    } else {
      dvms_buf_printf(out, "<|%s|>\n", role);
      st = content(msg, i, out);
      dvms_buf_put(out, "<|end|>\n", 8);
    }
    if (st) return st;
  }
  const char *open = header ? "<|start_header_id|>assistant<|end_header_id|>\n\n"
                     : turn ? "<start_of_turn>model\n" : "<|assistant|>\n";
  dvms_buf_put(out, open, strlen(open));
  return NULL;
}

/* Every message's role is system, user or assistant. */
static dvm_status *roles(json_t *msgs) {
  size_t i;
  json_t *msg;
  json_array_foreach(msgs, i, msg) {
    json_t *r = json_object_get(msg, "role");
    const char *role = json_is_string(r) ? json_string_value(r) : "";
    if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant"))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "messages[%zu].role: \"system\", \"user\" or \"assistant\" expected", i);
  }
  return NULL;
}

dvm_status *dvms_chat_prompt(const dvms_model *m, const void *messages, dvms_buf *out) {
  json_t *msgs = (json_t *)messages;
  if (!m->chat_template[0]) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s", m->chat_error);
  if (!json_is_array(msgs) || json_array_size(msgs) == 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "messages: a non-empty array expected");
  dvm_status *st = roles(msgs);
  if (st) return st;
  const char *t = m->chat_template;
  if (!strcmp(t, "header") || !strncmp(t, "tagged", 6) || !strcmp(t, "turn")) {
    st = blocks(m, msgs, out);
    if (!st && out->failed) st = dvm_status_new(DVM_OUT_OF_MEMORY, "the chat prompt");
    return st;
  }
  int chatml = strncmp(m->chat_template, "chatml", 6) == 0, llama2 = !strcmp(m->chat_template, "llama2");
  size_t i;
  json_t *msg;
  dvms_buf system = {0};
  json_array_foreach(msgs, i, msg) {
    const char *role = json_string_value(json_object_get(msg, "role"));
    if (chatml) {
      if (i == 0 && strcmp(role, "system") && strstr(m->chat_template, "+sys"))
        dvms_buf_printf(out, "<|im_start|>system\n%s<|im_end|>\n", qwen_system);
      dvms_buf_printf(out, "<|im_start|>%s\n", role);
      if ((st = content(msg, i, out))) break;
      dvms_buf_put(out, "<|im_end|>\n", 11);
    } else if (!strcmp(role, "system")) {
      if (!llama2 || i != 0) {
        st = dvm_status_new(DVM_INVALID_ARGUMENT, "messages[%zu]: a system message %s", i,
                            llama2 ? "must come first" : "is not supported by this model's [INST] chat template");
        break;
      }
      if ((st = content(msg, i, &system))) break;
    } else if (!strcmp(role, "user")) {
      dvms_buf_printf(out, "%s[INST] ", m->bos);
      if (system.len) {
        dvms_buf_put(out, "<<SYS>>\n", 8);
        dvms_buf_put(out, system.data, system.len);
        dvms_buf_put(out, "\n<</SYS>>\n\n", 11);
        system.len = 0;
      }
      if ((st = content(msg, i, out))) break;
      dvms_buf_put(out, " [/INST]", 8);
    } else {
      if (llama2) dvms_buf_put(out, " ", 1);
      if ((st = content(msg, i, out))) break;
      dvms_buf_printf(out, "%s%s", llama2 ? " " : "", m->eos);
    }
  }
  if (!st && chatml) dvms_buf_put(out, "<|im_start|>assistant\n", 22);
  if (!st && !chatml && strcmp(json_string_value(json_object_get(json_array_get(msgs, json_array_size(msgs) - 1), "role")), "user"))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "messages: the last message must be the user's for an [INST] chat template");
  dvms_buf_free(&system);
  if (!st && out->failed) st = dvm_status_new(DVM_OUT_OF_MEMORY, "the chat prompt");
  return st;
}
