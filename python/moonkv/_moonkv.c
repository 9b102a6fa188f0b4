/* python/moonkv/_moonkv.c - the moonkv Python binding: MoonkvStore, a thin
 * CPython type over libmoonkv shaped like Mooncake's MooncakeDistributedStore.
 *
 * Buffers come through the buffer protocol (or as Mooncake's raw pointer +
 * size ints); put_from/get_into hand the caller's memory straight to the
 * transfer engine, so bytes move between a registered buffer and the wire
 * without a copy. put()/get() take any bytes-like object and copy through
 * a registered scratch buffer of the store.
 *
 * Threads: one mkv_client is shared by threads (libmoonkv runs their
 * calls at once on lanes of its own), so a store takes no lock of its own:
 * the GIL is dropped during every libmoonkv call and calls from several
 * threads run truly at once. The store's own fields (the client, the
 * registrations, the scratch buffers) change only under the GIL; a call
 * counts itself busy while it runs, and close() waits until none is.
 * put()/get() copy through a scratch buffer each call takes for itself
 * from a small free list.
 *
 * Errors: moonkv's codes become exceptions (MoonkvError and one subclass
 * per code, with .code and .word), or are returned as negative ints when
 * the store was made with status_codes=True (Mooncake's int style). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moonkv.h"

/* ---- errors ---- */

typedef struct err_kind {
    int code;
    const char *word;      /* moonkv's error word, as in the RESP errors */
    const char *name;      /* the exception class */
    PyObject **builtin;    /* a builtin it also derives from, or NULL */
    PyObject *type;
} err_kind;

static PyObject *MoonkvError;
static err_kind err_kinds[] = {
    {MKV_ENOTFOUND, "NOTFOUND", "NotFoundError", &PyExc_KeyError, NULL},
    {MKV_EEXISTS, "EXISTS", "ExistsError", NULL, NULL},
    {MKV_ENOSPACE, "NOSPACE", "NoSpaceError", NULL, NULL},
    {MKV_ENOREPLICAS, "NOREPLICAS", "NoReplicasError", NULL, NULL},
    {MKV_EINVAL, "INVAL", "InvalidError", &PyExc_ValueError, NULL},
    {MKV_ENOTREG, "NOTREG", "NotRegisteredError", &PyExc_ValueError, NULL},
    {MKV_ETOOSMALL, "TOOSMALL", "TooSmallError", &PyExc_ValueError, NULL},
    {MKV_ECONN, "CONN", "ConnError", &PyExc_ConnectionError, NULL},
    {MKV_EAUTH, "AUTH", "AuthError", &PyExc_PermissionError, NULL},
    {MKV_EIO, "IO", "TransferError", NULL, NULL},
    {MKV_ECORRUPT, "CORRUPT", "CorruptError", NULL, NULL},
    {MKV_ETIMEDOUT, "TIMEDOUT", "TimedOutError", &PyExc_TimeoutError, NULL},
    {MKV_EPROTO, "PROTO", "ProtocolError", NULL, NULL},
    {MKV_ENOMEM, "NOMEM", "NoMemoryError", &PyExc_MemoryError, NULL},
    {MKV_ETRYAGAIN, "TRYAGAIN", "TryAgainError", NULL, NULL},
    {MKV_EFAULT, "FAULT", "BufferFaultError", &PyExc_ValueError, NULL},
    {MKV_EMOVED, "MOVED", "MovedError", NULL, NULL},
};
#define N_ERR_KINDS (sizeof err_kinds / sizeof err_kinds[0])

static const err_kind *err_kind_of(int code) {
    for (size_t i = 0; i < N_ERR_KINDS; i++)
        if (err_kinds[i].code == code) return &err_kinds[i];
    return NULL;
}

/* Raises the exception of code: "WORD: detail", with .code and .word. */
static PyObject *raise_code(int code, const char *detail) {
    const err_kind *k = err_kind_of(code);
    PyObject *type = k ? k->type : MoonkvError;
    const char *word = k ? k->word : "ERR";
    PyObject *msg = PyUnicode_FromFormat("%s: %s", word, detail && *detail ? detail : mkv_strerror(code));
    PyObject *exc = msg ? PyObject_CallOneArg(type, msg) : NULL;
    Py_XDECREF(msg);
    if (!exc) return NULL;
    PyObject *pycode = PyLong_FromLong(code), *pyword = PyUnicode_FromString(word);
    if (pycode && pyword && PyObject_SetAttrString(exc, "code", pycode) == 0 &&
        PyObject_SetAttrString(exc, "word", pyword) == 0)
        PyErr_SetObject(type, exc);
    Py_XDECREF(pycode);
    Py_XDECREF(pyword);
    Py_DECREF(exc);
    return NULL;
}

/* ---- buffers and keys ---- */

/* Memory handed to libmoonkv: a buffer-protocol view (which keeps its
 * exporter alive and, for bytearray, unresizable) or a raw pointer. */
typedef struct span {
    void *addr;
    size_t len;
    int has_view;
    Py_buffer view;
} span;

static void span_release(span *sp) {
    if (sp->has_view) PyBuffer_Release(&sp->view);
    sp->has_view = 0;
}

/* An int address and its size (Mooncake's buffer_ptr, size) as a piece. */
static int piece_at(PyObject *addr, PyObject *size, mkv_iov *out) {
    if (!PyLong_Check(addr)) {
        PyErr_SetString(PyExc_TypeError, "with a size, the buffer must be an int address");
        return -1;
    }
    out->buf = PyLong_AsVoidPtr(addr);
    out->len = PyLong_AsSize_t(size);
    return PyErr_Occurred() ? -1 : 0;
}

/* obj is a contiguous buffer; or, when size is given, an int address
 * (Mooncake's buffer_ptr) and size its length. */
static int span_from(PyObject *obj, PyObject *size, int writable, span *sp) {
    memset(sp, 0, sizeof *sp);
    if (size && size != Py_None) {
        mkv_iov v;
        if (piece_at(obj, size, &v) < 0) return -1;
        sp->addr = v.buf;
        sp->len = v.len;
        return 0;
    }
    if (PyObject_GetBuffer(obj, &sp->view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) return -1;
    sp->has_view = 1;
    sp->addr = sp->view.buf;
    sp->len = (size_t)sp->view.len;
    return 0;
}

/* A key: str (its UTF-8 bytes, owned by the str) or any bytes-like. */
static int key_from(PyObject *obj, span *sp) {
    if (PyUnicode_Check(obj)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(obj, &n);
        if (!s) return -1;
        memset(sp, 0, sizeof *sp);
        sp->addr = (void *)s;
        sp->len = (size_t)n;
        return 0;
    }
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError, "a key is str or bytes-like, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    return span_from(obj, NULL, 0, sp);
}

/* A key and a buffer (see span_from); on failure neither is held. */
static int key_and_buffer(PyObject *kobj, PyObject *bobj, PyObject *size, int writable, span *key,
                          span *buf) {
    if (key_from(kobj, key) < 0) return -1;
    if (span_from(bobj, size, writable, buf) == 0) return 0;
    span_release(key);
    return -1;
}

/* ---- the store ---- */

/* A registered scratch buffer of put()/get(), one call's at a time. */
typedef struct stage {
    char *buf;
    size_t len;
    struct stage *next;
} stage;

typedef struct store {
    PyObject_HEAD
    mkv_client *c;
    int busy;                    /* calls running on c (the GIL guards the fields) */
    int opening;                 /* setup() is connecting */
    int status_codes;            /* return MKV_E* ints instead of raising */
    span *regs;                  /* register_buffer()ed memory */
    size_t nregs, capregs;
    stage *stages;               /* free scratch buffers */
} store;

/* 0: a call that needs a connected client may run (counted busy until
 * store_leave). Else -1 and *res is what the call returns: MKV_EINVAL in
 * status mode, or NULL with the exception set. */
static int store_enter(store *s, PyObject **res) {
    *res = NULL;
    if (s->c) {
        s->busy++;
        return 0;
    }
    if (s->status_codes) *res = PyLong_FromLong(MKV_EINVAL);
    else raise_code(MKV_EINVAL, "the store is not set up (call setup() first) or is closed");
    return -1;
}

static void store_leave(store *s) { s->busy--; }

/* The failure of code, with this thread's message from the client. In
 * status mode it is returned as an int, else raised. */
static PyObject *store_fail(store *s, int code) {
    if (s->status_codes) return PyLong_FromLong(code);
    return raise_code(code, s->c ? mkv_last_error(s->c) : NULL);
}

/* None, or 0 in status mode: what a call that has no value returns. */
static PyObject *store_done(store *s) {
    if (s->status_codes) return PyLong_FromLong(0);
    Py_RETURN_NONE;
}

/* Drops every registration and the scratch buffers; c closed. */
static void store_forget(store *s) {
    for (size_t i = 0; i < s->nregs; i++) span_release(&s->regs[i]);
    s->nregs = 0;
    while (s->stages) {
        stage *g = s->stages;
        s->stages = g->next;
        free(g->buf);
        PyMem_Free(g);
    }
}

/* New calls are refused at once; the client closes once the running
 * ones returned (each is bounded by the client's timeouts). */
static void store_close_now(store *s) {
    if (s->c) {
        mkv_client *c = s->c;
        s->c = NULL;
        while (s->busy) {
            Py_BEGIN_ALLOW_THREADS
            usleep(1000);
            Py_END_ALLOW_THREADS
        }
        Py_BEGIN_ALLOW_THREADS
        mkv_close(c);
        Py_END_ALLOW_THREADS
    }
    store_forget(s);
}

static int store_init(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"status_codes", NULL};
    int status_codes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:MoonkvStore", kwlist, &status_codes)) return -1;
    s->status_codes = status_codes;
    return 0;
}

static void store_dealloc(store *s) {
    store_close_now(s);   /* nobody else holds a reference: no call runs */
    PyMem_Free(s->regs);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *store_setup(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"master", "cluster_secret", "replicas", "transport", "password",
                             "timeout_ms", "data_addrs", "etcd", "cluster_name", "groups", NULL};
    mkv_options opt;
    mkv_options_init(&opt);
    /* etcd: the leader (and with groups, the slot map) is read there (docs/SCALE.md) */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zzizzizzzp:setup", kwlist, &opt.master,
                                     &opt.cluster_secret, &opt.replicas, &opt.transport,
                                     &opt.password, &opt.timeout_ms, &opt.data_addrs, &opt.etcd,
                                     &opt.cluster_name, &opt.groups))
        return NULL;
    PyObject *res;
    if (s->c || s->opening) {
        res = s->status_codes ? PyLong_FromLong(MKV_EINVAL)
                              : raise_code(MKV_EINVAL, "the store is already set up (close() it first)");
    } else {
        mkv_client *c = NULL;
        int rc;
        s->opening = 1;
        Py_BEGIN_ALLOW_THREADS
        rc = mkv_connect(&c, &opt);
        Py_END_ALLOW_THREADS
        s->opening = 0;
        s->c = c;
        if (rc == MKV_OK) res = store_done(s);
        else res = s->status_codes ? PyLong_FromLong(rc) : raise_code(rc, mkv_last_error(NULL));
    }
    return res;
}

static PyObject *store_close(store *s, PyObject *Py_UNUSED(ignored)) {
    store_close_now(s);
    return store_done(s);
}

static PyObject *store_enter_ctx(store *s, PyObject *Py_UNUSED(ignored)) {
    Py_INCREF(s);
    return (PyObject *)s;
}

static PyObject *store_exit_ctx(store *s, PyObject *Py_UNUSED(args)) {
    PyObject *r = store_close(s, NULL);
    if (!r) return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

/* ---- registration ---- */

/* Room for one more registration in s->regs; GIL held. */
static int regs_reserve(store *s) {
    if (s->nregs < s->capregs) return 0;
    size_t cap = s->capregs ? s->capregs * 2 : 8;
    span *r = PyMem_Realloc(s->regs, cap * sizeof *r);
    if (!r) return -1;
    s->regs = r;
    s->capregs = cap;
    return 0;
}

static PyObject *store_register_buffer(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buffer", "size", NULL};
    PyObject *obj, *size = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:register_buffer", kwlist, &obj, &size)) return NULL;
    span sp;
    if (span_from(obj, size, 0, &sp) < 0) return NULL;
    PyObject *res;
    if (store_enter(s, &res) < 0) {
        span_release(&sp);
        return res;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mkv_register_buffer(s->c, sp.addr, sp.len);
    Py_END_ALLOW_THREADS
    /* Room is made and taken with the GIL held throughout: made before the
     * call, two threads both saw one free slot and both appended. */
    if (rc == MKV_OK && regs_reserve(s) < 0) {
        Py_BEGIN_ALLOW_THREADS
        mkv_unregister_buffer(s->c, sp.addr);
        Py_END_ALLOW_THREADS
        span_release(&sp);
        store_leave(s);
        return PyErr_NoMemory();
    }
    if (rc == MKV_OK) {
        s->regs[s->nregs++] = sp;   /* the view now lives as long as the registration */
        res = store_done(s);
    } else {
        span_release(&sp);
        res = store_fail(s, rc);
    }
    store_leave(s);
    return res;
}

static PyObject *store_unregister_buffer(store *s, PyObject *obj) {
    span sp;
    if (PyLong_Check(obj)) {
        memset(&sp, 0, sizeof sp);
        if (!(sp.addr = PyLong_AsVoidPtr(obj)) && PyErr_Occurred()) return NULL;
    } else if (span_from(obj, NULL, 0, &sp) < 0) {
        return NULL;
    }
    span_release(&sp);   /* only its address is needed */
    PyObject *res;
    if (store_enter(s, &res) < 0) return res;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mkv_unregister_buffer(s->c, sp.addr);
    Py_END_ALLOW_THREADS
    if (rc == MKV_OK) {
        for (size_t i = 0; i < s->nregs; i++) {
            if (s->regs[i].addr != sp.addr) continue;
            span_release(&s->regs[i]);
            s->regs[i] = s->regs[--s->nregs];
            break;
        }
    }
    res = rc == MKV_OK ? store_done(s) : store_fail(s, rc);
    store_leave(s);
    return res;
}

/* A scratch buffer for this call (GIL held), or NULL (no memory). */
static stage *stage_take(store *s) {
    stage *g = s->stages;
    if (g) s->stages = g->next;
    else g = PyMem_Calloc(1, sizeof *g);
    return g;
}

/* g holds at least len bytes, registered; the GIL is dropped meanwhile. */
static int stage_reserve(store *s, stage *g, size_t len) {
    if (len <= g->len) return MKV_OK;
    size_t cap = g->len ? g->len : 64 * 1024;
    while (cap < len) {
        if (cap > SIZE_MAX / 2) return MKV_ENOMEM;
        cap *= 2;
    }
    int rc = MKV_OK;
    Py_BEGIN_ALLOW_THREADS
    if (g->buf) mkv_unregister_buffer(s->c, g->buf);
    free(g->buf);
    g->len = 0;
    g->buf = aligned_alloc(4096, (cap + 4095) & ~(size_t)4095);
    if (!g->buf) rc = MKV_ENOMEM;
    else if ((rc = mkv_register_buffer(s->c, g->buf, cap)) != MKV_OK) {
        free(g->buf);
        g->buf = NULL;
    } else {
        g->len = cap;
    }
    Py_END_ALLOW_THREADS
    return rc;
}

/* A scratch buffer grown past this by one large value is dropped after
 * the call, so a store does not keep gigabytes it needed once. */
#define STAGE_KEEP ((size_t)64 << 20)

/* g back to the free list (GIL held), emptied if it grew too large. */
static void stage_give(store *s, stage *g) {
    if (g->len > STAGE_KEEP) {
        Py_BEGIN_ALLOW_THREADS
        mkv_unregister_buffer(s->c, g->buf);
        free(g->buf);
        Py_END_ALLOW_THREADS
        g->buf = NULL;
        g->len = 0;
    }
    g->next = s->stages;
    s->stages = g;
}

/* ---- single objects ---- */

static PyObject *store_put(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"key", "value", "replicas", NULL};
    PyObject *kobj, *vobj;
    int replicas = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|i:put", kwlist, &kobj, &vobj, &replicas)) return NULL;
    span key, val;
    if (key_and_buffer(kobj, vobj, NULL, 0, &key, &val) < 0) return NULL;
    PyObject *res;
    if (store_enter(s, &res) == 0) {
        stage *g = stage_take(s);
        int rc = g ? stage_reserve(s, g, val.len ? val.len : 1) : MKV_ENOMEM;
        if (rc == MKV_OK) {
            Py_BEGIN_ALLOW_THREADS
            memcpy(g->buf, val.addr, val.len);
            rc = mkv_put(s->c, key.addr, key.len, g->buf, val.len, replicas);
            Py_END_ALLOW_THREADS
        }
        res = rc == MKV_OK ? store_done(s) : store_fail(s, rc);
        if (g) stage_give(s, g);
        store_leave(s);
    }
    span_release(&val);
    span_release(&key);
    return res;
}

/* get(key) -> bytes: through the scratch buffer, grown when too small. */
static PyObject *store_get(store *s, PyObject *kobj) {
    span key;
    if (key_from(kobj, &key) < 0) return NULL;
    PyObject *res;
    if (store_enter(s, &res) == 0) {
        size_t got = 0;
        stage *g = stage_take(s);
        int rc = g ? stage_reserve(s, g, 1) : MKV_ENOMEM;
        for (int tries = 0; rc == MKV_OK && tries < 3; tries++) {
            Py_BEGIN_ALLOW_THREADS
            rc = mkv_get(s->c, key.addr, key.len, g->buf, g->len, &got);
            Py_END_ALLOW_THREADS
            if (rc != MKV_ETOOSMALL) break;
            rc = stage_reserve(s, g, got);
        }
        if (rc == MKV_OK) res = PyBytes_FromStringAndSize(g->buf, (Py_ssize_t)got);
        else if (s->status_codes) res = PyBytes_FromStringAndSize("", 0);   /* Mooncake: b"" */
        else res = store_fail(s, rc);
        if (g) stage_give(s, g);
        store_leave(s);
    } else if (res) {
        Py_SETREF(res, PyBytes_FromStringAndSize("", 0));   /* status mode: Mooncake's b"" */
    }
    span_release(&key);
    return res;
}

/* put_from / get_into: one object between the caller's memory and the
 * nodes, no copy. */
static PyObject *xfer_one(store *s, PyObject *kobj, PyObject *bobj, PyObject *size, int replicas,
                          int is_get) {
    span key, buf;
    if (key_and_buffer(kobj, bobj, size, is_get, &key, &buf) < 0) return NULL;
    PyObject *res;
    if (store_enter(s, &res) == 0) {
        int rc;
        size_t got = 0;
        Py_BEGIN_ALLOW_THREADS
        if (is_get) rc = mkv_get(s->c, key.addr, key.len, buf.addr, buf.len, &got);
        else rc = mkv_put(s->c, key.addr, key.len, buf.addr, buf.len, replicas);
        Py_END_ALLOW_THREADS
        if (rc != MKV_OK) res = store_fail(s, rc);
        else res = is_get ? PyLong_FromSize_t(got) : store_done(s);
        store_leave(s);
    }
    span_release(&buf);
    span_release(&key);
    return res;
}

static PyObject *store_put_from(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"key", "buffer", "size", "replicas", NULL};
    PyObject *kobj, *bobj, *size = NULL;
    int replicas = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|Oi:put_from", kwlist, &kobj, &bobj, &size, &replicas))
        return NULL;
    return xfer_one(s, kobj, bobj, size, replicas, 0);
}

static PyObject *store_get_into(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"key", "buffer", "size", NULL};
    PyObject *kobj, *bobj, *size = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:get_into", kwlist, &kobj, &bobj, &size)) return NULL;
    return xfer_one(s, kobj, bobj, size, 0, 1);
}

/* The key-only calls: is_exist, remove, get_size. */
enum key_op { OP_EXISTS, OP_REMOVE, OP_SIZE };

static PyObject *store_key_op(store *s, PyObject *kobj, enum key_op op) {
    span key;
    if (key_from(kobj, &key) < 0) return NULL;
    PyObject *res;
    if (store_enter(s, &res) == 0) {
        int rc;
        uint64_t size = 0;
        Py_BEGIN_ALLOW_THREADS
        if (op == OP_EXISTS) rc = mkv_exists(s->c, key.addr, key.len);
        else if (op == OP_REMOVE) rc = mkv_remove(s->c, key.addr, key.len);
        else rc = mkv_size(s->c, key.addr, key.len, &size);
        Py_END_ALLOW_THREADS
        if (rc < 0) res = store_fail(s, rc);
        else if (op == OP_EXISTS) res = s->status_codes ? PyLong_FromLong(rc) : PyBool_FromLong(rc);
        else if (op == OP_SIZE) res = PyLong_FromUnsignedLongLong(size);
        else res = store_done(s);
        store_leave(s);
    }
    span_release(&key);
    return res;
}

static PyObject *store_is_exist(store *s, PyObject *k) { return store_key_op(s, k, OP_EXISTS); }
static PyObject *store_remove(store *s, PyObject *k) { return store_key_op(s, k, OP_REMOVE); }
static PyObject *store_get_size(store *s, PyObject *k) { return store_key_op(s, k, OP_SIZE); }

/* transfer_stats(): libmoonkv's transfer counters as a dict, zeros but
 * shm_cold_bytes on a store not set up. It runs beside other threads'
 * calls (the engines count under their own locks); the GIL, held
 * throughout, keeps close() from freeing the client meanwhile (it clears
 * s->c before it lets go of the GIL). shm_cold_bytes is the whole process's: bytes
 * of mapped segments still warming, which transfers reach the slower
 * checked way until they are warm. */
static PyObject *store_transfer_stats(store *s, PyObject *Py_UNUSED(ignored)) {
    mkv_transfer_stats st;
    mkv_transfer_stats_get(s->c, &st);
    return Py_BuildValue("{sKsKsKsKsKsK}", "bytes_tcp", (unsigned long long)st.bytes_tcp, "bytes_shm",
                         (unsigned long long)st.bytes_shm, "bytes_rdma", (unsigned long long)st.bytes_rdma,
                         "retries", (unsigned long long)st.retries, "failovers",
                         (unsigned long long)st.failovers, "shm_cold_bytes",
                         (unsigned long long)st.shm_cold_bytes);
}

/* ---- batches ---- */

/* A batch's converted arguments: per object a key span, a buffer span
 * (when the call has buffers) and the mkv_obj handed to libmoonkv. */
typedef struct batch {
    size_t n;
    span *keys, *bufs;
    mkv_obj *objs;
    int *results;
} batch;

static void batch_free(batch *b) {
    for (size_t i = 0; i < b->n; i++) {
        if (b->keys) span_release(&b->keys[i]);
        if (b->bufs) span_release(&b->bufs[i]);
    }
    PyMem_Free(b->keys);
    PyMem_Free(b->bufs);
    PyMem_Free(b->objs);
    PyMem_Free(b->results);
}

/* Fills b from the sequences (bufs, sizes may be NULL); keys, bufs and
 * sizes are tuples. Every span taken is released by batch_free. */
static int batch_fill(batch *b, PyObject *keys, PyObject *bufs, PyObject *sizes, int writable) {
    size_t n = (size_t)PyTuple_GET_SIZE(keys);
    if ((bufs && (size_t)PyTuple_GET_SIZE(bufs) != n) || (sizes && (size_t)PyTuple_GET_SIZE(sizes) != n)) {
        PyErr_SetString(PyExc_ValueError, "keys, buffers and sizes must have the same length");
        return -1;
    }
    size_t alloc_n = n ? n : 1;
    b->keys = PyMem_Calloc(alloc_n, sizeof *b->keys);
    b->bufs = bufs ? PyMem_Calloc(alloc_n, sizeof *b->bufs) : NULL;
    b->objs = PyMem_Calloc(alloc_n, sizeof *b->objs);
    b->results = PyMem_Calloc(alloc_n, sizeof *b->results);
    if (!b->keys || (bufs && !b->bufs) || !b->objs || !b->results) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        b->n = i;   /* spans [0, i) are taken */
        if (key_from(PyTuple_GET_ITEM(keys, i), &b->keys[i]) < 0) return -1;
        b->n = i + 1;
        b->objs[i].key = b->keys[i].addr;
        b->objs[i].keylen = b->keys[i].len;
        if (!bufs) continue;
        if (span_from(PyTuple_GET_ITEM(bufs, i), sizes ? PyTuple_GET_ITEM(sizes, i) : NULL, writable,
                      &b->bufs[i]) < 0)
            return -1;
        b->objs[i].buf = b->bufs[i].addr;
        b->objs[i].len = b->bufs[i].len;
    }
    b->n = n;
    return 0;
}

/* A new tuple of seq's items (so the caller may not shrink it under us),
 * or NULL with a TypeError set (None included: returning NULL with no
 * exception set made CPython raise SystemError). */
static PyObject *as_tuple(PyObject *seq, const char *what) {
    PyObject *t = seq && seq != Py_None ? PySequence_Tuple(seq) : NULL;
    if (!t && (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)))
        PyErr_Format(PyExc_TypeError, "%s must be a sequence, not %.100s", what,
                     seq ? Py_TYPE(seq)->tp_name : "nothing");
    return t;
}

enum batch_op { OP_BPUT, OP_BGET, OP_BEXISTS };

/* The per-object results: size (get), 0 (put), 1/0 (exists), or MKV_E*. */
static PyObject *batch_results(const batch *b, enum batch_op op, int whole_rc) {
    PyObject *list = PyList_New((Py_ssize_t)b->n);
    for (size_t i = 0; list && i < b->n; i++) {
        PyObject *v;
        if (whole_rc != MKV_OK) v = PyLong_FromLong(whole_rc);
        else if (op == OP_BEXISTS) v = PyLong_FromLong(b->results[i]);
        else if (b->objs[i].status != MKV_OK) v = PyLong_FromLong(b->objs[i].status);
        else v = PyLong_FromSize_t(op == OP_BGET ? b->objs[i].len : 0);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

static PyObject *store_batch(store *s, enum batch_op op, PyObject *kobj, PyObject *bobj,
                             PyObject *zobj, int replicas) {
    PyObject *keys = as_tuple(kobj, "keys"), *bufs = NULL, *sizes = NULL, *res = NULL;
    batch b = {0};
    if (!keys) return NULL;
    if (op != OP_BEXISTS && !(bufs = as_tuple(bobj, "buffers"))) goto out;
    if (zobj && zobj != Py_None && !(sizes = as_tuple(zobj, "sizes"))) goto out;
    if (batch_fill(&b, keys, bufs, sizes, op == OP_BGET) < 0) goto out;
    int rc;
    if (store_enter(s, &res) < 0) {
        if (res) Py_SETREF(res, batch_results(&b, op, MKV_EINVAL));   /* status mode */
        goto out;
    }
    Py_BEGIN_ALLOW_THREADS
    if (op == OP_BPUT) rc = mkv_put_batch(s->c, b.objs, b.n, replicas);
    else if (op == OP_BGET) rc = mkv_get_batch(s->c, b.objs, b.n);
    else rc = mkv_exists_batch(s->c, b.objs, b.n, b.results);
    Py_END_ALLOW_THREADS
    if (rc != MKV_OK && !s->status_codes) res = store_fail(s, rc);
    else res = batch_results(&b, op, rc);
    store_leave(s);
out:
    batch_free(&b);
    Py_XDECREF(keys);
    Py_XDECREF(bufs);
    Py_XDECREF(sizes);
    return res;
}

static PyObject *store_batch_put_from(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"keys", "buffers", "sizes", "replicas", NULL};
    PyObject *keys, *bufs, *sizes = NULL;
    int replicas = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|Oi:batch_put_from", kwlist, &keys, &bufs, &sizes,
                                     &replicas))
        return NULL;
    return store_batch(s, OP_BPUT, keys, bufs, sizes, replicas);
}

static PyObject *store_batch_get_into(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"keys", "buffers", "sizes", NULL};
    PyObject *keys, *bufs, *sizes = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:batch_get_into", kwlist, &keys, &bufs, &sizes))
        return NULL;
    return store_batch(s, OP_BGET, keys, bufs, sizes, 0);
}

static PyObject *store_batch_is_exist(store *s, PyObject *keys) {
    return store_batch(s, OP_BEXISTS, keys, NULL, NULL, 0);
}

/* ---- objects in pieces (scatter/gather) ---- */

/* A batch of objects held in pieces: per object its key span and, in
 * one flat array, the spans of its pieces (iov[first[i]..first[i+1])). */
typedef struct vbatch {
    size_t n, npieces;
    span *keys, *pieces;
    mkv_iov *iov;
    mkv_objv *objs;
} vbatch;

static void vbatch_free(vbatch *b) {
    for (size_t i = 0; b->keys && i < b->n; i++) span_release(&b->keys[i]);
    for (size_t i = 0; b->pieces && i < b->npieces; i++) span_release(&b->pieces[i]);
    PyMem_Free(b->keys);
    PyMem_Free(b->pieces);
    PyMem_Free(b->iov);
    PyMem_Free(b->objs);
}

/* The total pieces of bufs (a tuple of sequences), checking sizes (a
 * tuple or NULL) has the same shape. */
static Py_ssize_t vbatch_count(PyObject *bufs, PyObject *sizes) {
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(bufs); i++) {
        Py_ssize_t k = PySequence_Size(PyTuple_GET_ITEM(bufs, i));
        if (k < 0) return -1;
        if (sizes) {
            Py_ssize_t z = PySequence_Size(PyTuple_GET_ITEM(sizes, i));
            if (z < 0) return -1;
            if (z != k) {
                PyErr_SetString(PyExc_ValueError, "each key needs as many sizes as buffers");
                return -1;
            }
        }
        total += k;
    }
    return total;
}

/* Fills b: keys a tuple, bufs a tuple of sequences of buffers (or of int
 * addresses, sizes then a tuple of sequences of their lengths). */
static int vbatch_fill(vbatch *b, PyObject *keys, PyObject *bufs, PyObject *sizes, int writable) {
    size_t n = (size_t)PyTuple_GET_SIZE(keys);
    if ((size_t)PyTuple_GET_SIZE(bufs) != n || (sizes && (size_t)PyTuple_GET_SIZE(sizes) != n)) {
        PyErr_SetString(PyExc_ValueError, "keys, buffers and sizes must have the same length");
        return -1;
    }
    Py_ssize_t total = vbatch_count(bufs, sizes);
    if (total < 0) return -1;
    size_t an = n ? n : 1, ap = total ? (size_t)total : 1;
    b->keys = PyMem_Calloc(an, sizeof *b->keys);
    /* int addresses (sizes given) hold no view: no span per piece (a
     * 128 x 32 page would clear 400 KiB of them per call) */
    b->pieces = sizes ? NULL : PyMem_Calloc(ap, sizeof *b->pieces);
    b->iov = PyMem_Malloc(ap * sizeof *b->iov);
    b->objs = PyMem_Calloc(an, sizeof *b->objs);
    if (!b->keys || (!sizes && !b->pieces) || !b->iov || !b->objs) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (key_from(PyTuple_GET_ITEM(keys, i), &b->keys[i]) < 0) return -1;
        b->n = i + 1;
        PyObject *row = PySequence_Fast(PyTuple_GET_ITEM(bufs, i), "buffers of a key must be a sequence");
        PyObject *zrow = sizes ? PySequence_Fast(PyTuple_GET_ITEM(sizes, i), "sizes of a key must be a sequence")
                               : NULL;
        if (!row || (sizes && !zrow)) {
            Py_XDECREF(row);
            Py_XDECREF(zrow);
            return -1;
        }
        size_t first = b->npieces;
        int bad = 0;
        for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(row) && !bad; j++) {
            if (zrow) {
                bad = piece_at(PySequence_Fast_GET_ITEM(row, j), PySequence_Fast_GET_ITEM(zrow, j),
                               &b->iov[b->npieces]) < 0;
                b->npieces += !bad;
                continue;
            }
            span *sp = &b->pieces[b->npieces];
            bad = span_from(PySequence_Fast_GET_ITEM(row, j), NULL, writable, sp) < 0;
            if (bad) break;
            b->iov[b->npieces++] = (mkv_iov){sp->addr, sp->len};
        }
        Py_DECREF(row);
        Py_XDECREF(zrow);
        if (bad) return -1;
        b->objs[i] = (mkv_objv){.key = b->keys[i].addr, .keylen = b->keys[i].len, .iov = b->iov + first,
                                .niov = b->npieces - first};
    }
    return 0;
}

/* Per object: the size read (get), 0 (put), or its MKV_E*. */
static PyObject *vbatch_results(const vbatch *b, int is_get, int whole_rc) {
    PyObject *list = PyList_New((Py_ssize_t)b->n);
    for (size_t i = 0; list && i < b->n; i++) {
        long long v = whole_rc != MKV_OK ? whole_rc : b->objs[i].status != MKV_OK ? b->objs[i].status
                      : is_get ? (long long)b->objs[i].len : 0;
        PyObject *o = PyLong_FromLongLong(v);
        if (!o) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, o);
    }
    return list;
}

static PyObject *store_vbatch(store *s, int is_get, PyObject *kobj, PyObject *bobj, PyObject *zobj, int replicas) {
    PyObject *keys = as_tuple(kobj, "keys"), *bufs = NULL, *sizes = NULL, *res = NULL;
    vbatch b = {0};
    if (!keys) return NULL;
    if (!(bufs = as_tuple(bobj, "buffers"))) goto out;
    if (zobj && zobj != Py_None && !(sizes = as_tuple(zobj, "sizes"))) goto out;
    if (vbatch_fill(&b, keys, bufs, sizes, is_get) < 0) goto out;
    if (store_enter(s, &res) < 0) {
        if (res) Py_SETREF(res, vbatch_results(&b, is_get, MKV_EINVAL));   /* status mode */
        goto out;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = is_get ? mkv_get_batchv(s->c, b.objs, b.n) : mkv_put_batchv(s->c, b.objs, b.n, replicas);
    Py_END_ALLOW_THREADS
    if (rc != MKV_OK && !s->status_codes) res = store_fail(s, rc);
    else res = vbatch_results(&b, is_get, rc);
    store_leave(s);
out:
    vbatch_free(&b);
    Py_XDECREF(keys);
    Py_XDECREF(bufs);
    Py_XDECREF(sizes);
    return res;
}

static PyObject *store_batch_put_from_multi(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"keys", "buffers", "sizes", "replicas", NULL};
    PyObject *keys, *bufs, *sizes = NULL;
    int replicas = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|Oi:batch_put_from_multi_buffers", kwlist, &keys, &bufs,
                                     &sizes, &replicas))
        return NULL;
    return store_vbatch(s, 0, keys, bufs, sizes, replicas);
}

static PyObject *store_batch_get_into_multi(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"keys", "buffers", "sizes", NULL};
    PyObject *keys, *bufs, *sizes = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:batch_get_into_multi_buffers", kwlist, &keys, &bufs,
                                     &sizes))
        return NULL;
    return store_vbatch(s, 1, keys, bufs, sizes, 0);
}

/* prefix_exists(keys, pin_ms=0, pin=0) -> how many keys, from the first
 * on, are stored; with pin_ms, (count, pin id): the hits stay until
 * unpin(pin id) or pin_ms (pin: an earlier id to add them to). */
static PyObject *store_prefix_exists(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"keys", "pin_ms", "pin", NULL};
    PyObject *kobj;
    long long ms = 0;
    unsigned long long pin = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|LK:prefix_exists", kwlist, &kobj, &ms, &pin)) return NULL;
    if (ms < 0 || ms > UINT32_MAX) return raise_code(MKV_EINVAL, "pin time must be 1 to 600000 ms");
    uint32_t pin_ms = (uint32_t)ms;
    PyObject *keys = as_tuple(kobj, "keys"), *res = NULL;
    batch b = {0};
    if (!keys) return NULL;
    if (batch_fill(&b, keys, NULL, NULL, 0) == 0 && store_enter(s, &res) == 0) {
        size_t hit = 0;
        uint64_t id = pin;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = pin_ms ? mkv_exists_prefix_pin(s->c, b.objs, b.n, pin_ms, &id, &hit)
                    : mkv_exists_prefix(s->c, b.objs, b.n, &hit);
        Py_END_ALLOW_THREADS
        if (rc != MKV_OK) res = store_fail(s, rc);
        else if (pin_ms) res = Py_BuildValue("nK", (Py_ssize_t)hit, (unsigned long long)id);
        else res = PyLong_FromSize_t(hit);
        store_leave(s);
    }
    batch_free(&b);
    Py_DECREF(keys);
    return res;
}

/* unpin(pin id) -> how many keys it held. */
static PyObject *store_unpin(store *s, PyObject *arg) {
    unsigned long long pin = PyLong_AsUnsignedLongLong(arg);
    if (pin == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    PyObject *res = NULL;
    if (store_enter(s, &res) < 0) return res;
    size_t keys = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mkv_unpin(s->c, pin, &keys);
    Py_END_ALLOW_THREADS
    res = rc == MKV_OK ? PyLong_FromSize_t(keys) : store_fail(s, rc);
    store_leave(s);
    return res;
}

/* get_range(key, offset, buffer[, size]) -> bytes read, zero-copy. */
static PyObject *store_get_range(store *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"key", "offset", "buffer", "size", NULL};
    PyObject *kobj, *bobj, *size = NULL;
    unsigned long long off;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OKO|O:get_range", kwlist, &kobj, &off, &bobj, &size)) return NULL;
    span key, buf;
    if (key_and_buffer(kobj, bobj, size, 1, &key, &buf) < 0) return NULL;
    PyObject *res;
    if (store_enter(s, &res) == 0) {
        size_t got = 0;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = mkv_get_range(s->c, key.addr, key.len, off, buf.addr, buf.len, &got);
        Py_END_ALLOW_THREADS
        res = rc == MKV_OK ? PyLong_FromSize_t(got) : store_fail(s, rc);
        store_leave(s);
    }
    span_release(&buf);
    span_release(&key);
    return res;
}

/* remove_all() -> how many objects were removed. */
static PyObject *store_remove_all(store *s, PyObject *Py_UNUSED(ignored)) {
    PyObject *res;
    if (store_enter(s, &res) < 0) return res;
    uint64_t removed = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = mkv_remove_all(s->c, &removed);
    Py_END_ALLOW_THREADS
    res = rc == MKV_OK ? PyLong_FromUnsignedLongLong(removed) : store_fail(s, rc);
    store_leave(s);
    return res;
}

/* ---- type and module ---- */

static PyMethodDef store_methods[] = {
    {"setup", (PyCFunction)(void (*)(void))store_setup, METH_VARARGS | METH_KEYWORDS,
     "setup(master='127.0.0.1:7380', cluster_secret=None, replicas=1, transport='auto',\n"
     "      password=None, timeout_ms=5000, data_addrs=None): connect to the master"},
    {"close", (PyCFunction)store_close, METH_NOARGS, "close(): disconnect, drop registrations"},
    {"__enter__", (PyCFunction)store_enter_ctx, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)store_exit_ctx, METH_VARARGS, NULL},
    {"register_buffer", (PyCFunction)(void (*)(void))store_register_buffer, METH_VARARGS | METH_KEYWORDS,
     "register_buffer(buffer) or register_buffer(ptr, size): memory for put_from/get_into"},
    {"unregister_buffer", (PyCFunction)store_unregister_buffer, METH_O,
     "unregister_buffer(buffer or ptr)"},
    {"put", (PyCFunction)(void (*)(void))store_put, METH_VARARGS | METH_KEYWORDS,
     "put(key, value, replicas=0): store a bytes-like value (copied once)"},
    {"get", (PyCFunction)store_get, METH_O, "get(key) -> bytes"},
    {"put_from", (PyCFunction)(void (*)(void))store_put_from, METH_VARARGS | METH_KEYWORDS,
     "put_from(key, buffer) or put_from(key, ptr, size): zero-copy from registered memory"},
    {"get_into", (PyCFunction)(void (*)(void))store_get_into, METH_VARARGS | METH_KEYWORDS,
     "get_into(key, buffer) or get_into(key, ptr, size) -> bytes read, zero-copy"},
    {"batch_put_from", (PyCFunction)(void (*)(void))store_batch_put_from, METH_VARARGS | METH_KEYWORDS,
     "batch_put_from(keys, buffers[, sizes], replicas=0) -> [0 or error code]"},
    {"batch_get_into", (PyCFunction)(void (*)(void))store_batch_get_into, METH_VARARGS | METH_KEYWORDS,
     "batch_get_into(keys, buffers[, sizes]) -> [bytes read or error code]"},
    {"is_exist", (PyCFunction)store_is_exist, METH_O, "is_exist(key) -> bool (1/0 with status codes)"},
    {"batch_is_exist", (PyCFunction)store_batch_is_exist, METH_O,
     "batch_is_exist(keys) -> [1, 0 or error code]"},
    {"remove", (PyCFunction)store_remove, METH_O, "remove(key)"},
    {"transfer_stats", (PyCFunction)store_transfer_stats, METH_NOARGS,
     "transfer_stats() -> {bytes_tcp, bytes_shm, bytes_rdma, retries, failovers, shm_cold_bytes}"},
    {"get_size", (PyCFunction)store_get_size, METH_O, "get_size(key) -> size in bytes"},
    {"batch_put_from_multi_buffers", (PyCFunction)(void (*)(void))store_batch_put_from_multi,
     METH_VARARGS | METH_KEYWORDS,
     "batch_put_from_multi_buffers(keys, buffers_per_key[, sizes_per_key], replicas=0) -> [0 or error code]:\n"
     "each object is its pieces in order, each moved from its own registered memory"},
    {"batch_get_into_multi_buffers", (PyCFunction)(void (*)(void))store_batch_get_into_multi,
     METH_VARARGS | METH_KEYWORDS,
     "batch_get_into_multi_buffers(keys, buffers_per_key[, sizes_per_key]) -> [bytes read or error code]"},
    {"prefix_exists", (PyCFunction)(void (*)(void))store_prefix_exists, METH_VARARGS | METH_KEYWORDS,
     "prefix_exists(keys, pin_ms=0, pin=0) -> how many keys, from the first on, are stored (one master "
     "round trip); with pin_ms (1 to 600000), (count, pin id): the hits cannot be removed until "
     "unpin(pin id) or pin_ms"},
    {"unpin", (PyCFunction)store_unpin, METH_O,
     "unpin(pin id) -> how many keys the pin held (0: expired or none)"},
    {"get_range", (PyCFunction)(void (*)(void))store_get_range, METH_VARARGS | METH_KEYWORDS,
     "get_range(key, offset, buffer[, size]) -> bytes read of [offset, offset + len(buffer)), zero-copy"},
    {"remove_all", (PyCFunction)store_remove_all, METH_NOARGS, "remove_all() -> how many objects were removed"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject store_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "moonkv.MoonkvStore",
    .tp_doc = "MoonkvStore(status_codes=False): a moonkv client, shaped like Mooncake's\n"
              "MooncakeDistributedStore. With status_codes=True calls return ints\n"
              "(0 / negative moonkv codes) instead of raising.",
    .tp_basicsize = sizeof(store),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)store_init,
    .tp_dealloc = (destructor)store_dealloc,
    .tp_methods = store_methods,
};

static PyObject *mod_strerror(PyObject *Py_UNUSED(m), PyObject *arg) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(mkv_strerror((int)code));
}

static PyObject *mod_error_word(PyObject *Py_UNUSED(m), PyObject *arg) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return NULL;
    const err_kind *k = err_kind_of((int)code);
    return PyUnicode_FromString(code == 0 ? "OK" : k ? k->word : "ERR");
}

static PyMethodDef mod_methods[] = {
    {"strerror", mod_strerror, METH_O, "strerror(code) -> what a moonkv status code means"},
    {"error_word", mod_error_word, METH_O, "error_word(code) -> 'OK', 'EXISTS', 'NOSPACE', ..."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moonkv_module = {
    PyModuleDef_HEAD_INIT, "moonkv._moonkv", "moonkv client (libmoonkv binding)", -1, mod_methods,
    NULL, NULL, NULL, NULL,
};

/* MoonkvError and a subclass per code; the codes as ints (ENOTFOUND, ...). */
static int add_errors(PyObject *m) {
    MoonkvError = PyErr_NewExceptionWithDoc("moonkv.MoonkvError",
                                            "a moonkv call failed; .code is the status, .word its name",
                                            NULL, NULL);
    if (!MoonkvError || PyModule_AddObjectRef(m, "MoonkvError", MoonkvError) < 0) return -1;
    if (PyModule_AddIntConstant(m, "OK", MKV_OK) < 0) return -1;
    for (size_t i = 0; i < N_ERR_KINDS; i++) {
        err_kind *k = &err_kinds[i];
        char qual[64], cname[32];
        snprintf(qual, sizeof qual, "moonkv.%s", k->name);
        snprintf(cname, sizeof cname, "E%s", k->word);
        PyObject *bases = k->builtin ? PyTuple_Pack(2, MoonkvError, *k->builtin) : PyTuple_Pack(1, MoonkvError);
        if (!bases) return -1;
        k->type = PyErr_NewException(qual, bases, NULL);
        Py_DECREF(bases);
        if (!k->type || PyModule_AddObjectRef(m, k->name, k->type) < 0 ||
            PyModule_AddIntConstant(m, cname, k->code) < 0)
            return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__moonkv(void) {
    if (PyType_Ready(&store_type) < 0) return NULL;
    PyObject *m = PyModule_Create(&moonkv_module);
    if (!m) return NULL;
    if (add_errors(m) < 0 || PyModule_AddObjectRef(m, "MoonkvStore", (PyObject *)&store_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
