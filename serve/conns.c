/* The open connections and their deadlines. libmicrohttpd times a
 * connection out only when it is silent, so a client that sends a byte now
 * and then would hold its thread and its slot for ever: here each
 * connection has a deadline for its headers (also while it idles between
 * requests) and one for its body, and a watcher thread shuts down the
 * socket of any connection past its deadline, which ends the connection
 * in its own thread. The list's lock is held by libmicrohttpd's
 * notification of a closed connection, which comes before it closes the
 * socket, so the watcher never shuts down a descriptor reused by another.
 * The records are allocated with the list, one for each connection
 * libmicrohttpd may hold open, so that opening one needs no memory. */
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "serve.h"

typedef struct conn {
  struct conn *prev, *next;
  int fd;
  int phase;       /* DVMS_CONN_* */
  double deadline; /* of this phase; 0: none */
  int spare;       /* opened with max connections already open */
} conn;

struct dvms_conns {
  pthread_mutex_t mu;
  pthread_cond_t wake;
  conn head;  /* a ring: head.next is the first */
  conn *free; /* the unused records, linked by next */
  conn *records;
  int open, max;
  double header_s, body_s;
  int stopping;
  pthread_t watcher;
};

static void *watch(void *arg) {
  dvms_conns *cs = arg;
  pthread_mutex_lock(&cs->mu);
  while (!cs->stopping) {
    double now = dvms_now();
    for (conn *c = cs->head.next; c != &cs->head; c = c->next)
      if (c->deadline > 0 && now >= c->deadline) {
        shutdown(c->fd, SHUT_RDWR);
        c->deadline = 0;
      }
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += 100 * 1000 * 1000; /* deadlines are seconds; a tenth is precise enough */
    if (t.tv_nsec >= 1000000000) {
      t.tv_sec++;
      t.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&cs->wake, &cs->mu, &t);
  }
  pthread_mutex_unlock(&cs->mu);
  return NULL;
}

dvm_status *dvms_conns_create(int max, double header_s, double body_s, dvms_conns **out) {
  dvms_conns *cs = calloc(1, sizeof *cs);
  int n = max + DVMS_SPARE_CONNECTIONS;
  conn *records = cs ? calloc((size_t)n, sizeof *records) : NULL;
  if (!records) {
    free(cs);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "records of %d connections", n);
  }
  for (int i = 0; i < n; i++) records[i].next = i + 1 < n ? &records[i + 1] : NULL;
  cs->records = cs->free = records;
  cs->head.next = cs->head.prev = &cs->head;
  cs->max = max;
  cs->header_s = header_s;
  cs->body_s = body_s;
  pthread_mutex_init(&cs->mu, NULL);
  pthread_cond_init(&cs->wake, NULL);
  if (pthread_create(&cs->watcher, NULL, watch, cs) != 0) {
    pthread_cond_destroy(&cs->wake);
    pthread_mutex_destroy(&cs->mu);
    free(records);
    free(cs);
    return dvm_status_new(DVM_UNAVAILABLE, "cannot start the connection watcher thread");
  }
  *out = cs;
  return NULL;
}

void dvms_conns_free(dvms_conns *cs) {
  if (!cs) return;
  pthread_mutex_lock(&cs->mu);
  cs->stopping = 1;
  pthread_cond_signal(&cs->wake);
  pthread_mutex_unlock(&cs->mu);
  pthread_join(cs->watcher, NULL);
  pthread_cond_destroy(&cs->wake);
  pthread_mutex_destroy(&cs->mu);
  free(cs->records);
  free(cs);
}

static double phase_deadline(const dvms_conns *cs, int phase) {
  double s = phase == DVMS_CONN_HEADERS ? cs->header_s : phase == DVMS_CONN_BODY ? cs->body_s : 0;
  return s > 0 ? dvms_now() + s : 0;
}

void dvms_conns_opened(dvms_conns *cs, int fd, void **ctx) {
  pthread_mutex_lock(&cs->mu);
  conn *c = cs->free;
  if (!c) { /* more than libmicrohttpd's limit: untracked, so refused */
    pthread_mutex_unlock(&cs->mu);
    shutdown(fd, SHUT_RDWR);
    return;
  }
  cs->free = c->next;
  c->fd = fd;
  c->phase = DVMS_CONN_HEADERS;
  c->deadline = phase_deadline(cs, c->phase);
  c->next = &cs->head;
  c->prev = cs->head.prev;
  c->prev->next = c;
  cs->head.prev = c;
  c->spare = cs->open++ >= cs->max;
  pthread_mutex_unlock(&cs->mu);
  *ctx = c;
}

void dvms_conns_closed(dvms_conns *cs, void *ctx) {
  conn *c = ctx;
  if (!c) return;
  pthread_mutex_lock(&cs->mu);
  c->prev->next = c->next;
  c->next->prev = c->prev;
  cs->open--;
  c->next = cs->free;
  cs->free = c;
  pthread_mutex_unlock(&cs->mu);
}

void dvms_conns_phase(dvms_conns *cs, void *ctx, int phase) {
  conn *c = ctx;
  if (!c) return;
  pthread_mutex_lock(&cs->mu);
  c->phase = phase;
  c->deadline = phase_deadline(cs, phase);
  pthread_mutex_unlock(&cs->mu);
}

int dvms_conns_spare(void *ctx) {
  const conn *c = ctx;
  return !c || c->spare;
}
