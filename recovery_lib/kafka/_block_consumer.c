/*
 * A Kafka consumer that hands over whole blocks of records as columns.
 *
 * confluent-kafka makes a Python object per record (the Message, its key, value and header
 * tuples); a reader of 10^7 sink records spends more time there than librdkafka spends
 * fetching them. This module drives the same librdkafka (the copy confluent-kafka ships,
 * loaded by path: no link-time dependency, no headers needed) and returns each block of
 * records as Arrow-ready buffers: offsets and data of ids, keys and values, partitions,
 * offsets, the epoch header, and flags for control and fence records. Python builds the Arrow
 * arrays from them without looking at a record (recovery_lib/kafka/block_consumer.py).
 *
 * Only the stable public ABI of librdkafka is used: the message and partition-list structs
 * and the functions declared below (rdkafka.h of librdkafka 2.x).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* -- librdkafka's public ABI (rdkafka.h) -------------------------------------------------- */

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct rd_kafka_headers_s rd_kafka_headers_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef int rd_kafka_resp_err_t;

typedef struct {
    rd_kafka_resp_err_t err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

typedef struct {
    char *topic;
    int32_t partition;
    int64_t offset;
    void *metadata;
    size_t metadata_size;
    void *opaque;
    rd_kafka_resp_err_t err;
    void *_private;
} rd_kafka_topic_partition_t;

typedef struct {
    int cnt;
    int size;
    rd_kafka_topic_partition_t *elems;
} rd_kafka_topic_partition_list_t;

#define RD_KAFKA_CONSUMER 1
#define RD_KAFKA_CONF_OK 0

static struct {
    rd_kafka_conf_t *(*conf_new)(void);
    int (*conf_set)(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
    void (*conf_destroy)(rd_kafka_conf_t *);
    rd_kafka_t *(*new_)(int, rd_kafka_conf_t *, char *, size_t);
    rd_kafka_resp_err_t (*poll_set_consumer)(rd_kafka_t *);
    rd_kafka_queue_t *(*queue_get_consumer)(rd_kafka_t *);
    void (*queue_destroy)(rd_kafka_queue_t *);
    ssize_t (*consume_batch_queue)(rd_kafka_queue_t *, int, rd_kafka_message_t **, size_t);
    void (*message_destroy)(rd_kafka_message_t *);
    rd_kafka_resp_err_t (*message_headers)(const rd_kafka_message_t *, rd_kafka_headers_t **);
    rd_kafka_resp_err_t (*header_get_last)(const rd_kafka_headers_t *, const char *,
                                           const void **, size_t *);
    rd_kafka_topic_partition_list_t *(*list_new)(int);
    rd_kafka_topic_partition_t *(*list_add)(rd_kafka_topic_partition_list_t *, const char *,
                                            int32_t);
    void (*list_destroy)(rd_kafka_topic_partition_list_t *);
    /* const list in rdkafka.h: the same call */
    rd_kafka_resp_err_t (*assign)(rd_kafka_t *, rd_kafka_topic_partition_list_t *);
    rd_kafka_resp_err_t (*position)(rd_kafka_t *, rd_kafka_topic_partition_list_t *);
    rd_kafka_resp_err_t (*pause_partitions)(rd_kafka_t *, rd_kafka_topic_partition_list_t *);
    rd_kafka_resp_err_t (*consumer_close)(rd_kafka_t *);
    void (*destroy)(rd_kafka_t *);
    const char *(*err2str)(rd_kafka_resp_err_t);
} rk;

static int loaded = 0;

static PyObject *load(PyObject *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_ImportError, "cannot load librdkafka from %s: %s", path, dlerror());
        return NULL;
    }
#define SYM(field, name)                                                                       \
    do {                                                                                       \
        *(void **)(&rk.field) = dlsym(lib, name);                                              \
        if (rk.field == NULL) {                                                                \
            PyErr_Format(PyExc_ImportError, "%s lacks %s", path, name);                        \
            return NULL;                                                                       \
        }                                                                                      \
    } while (0)
    SYM(conf_new, "rd_kafka_conf_new");
    SYM(conf_set, "rd_kafka_conf_set");
    SYM(conf_destroy, "rd_kafka_conf_destroy");
    SYM(new_, "rd_kafka_new");
    SYM(poll_set_consumer, "rd_kafka_poll_set_consumer");
    SYM(queue_get_consumer, "rd_kafka_queue_get_consumer");
    SYM(queue_destroy, "rd_kafka_queue_destroy");
    SYM(consume_batch_queue, "rd_kafka_consume_batch_queue");
    SYM(message_destroy, "rd_kafka_message_destroy");
    SYM(message_headers, "rd_kafka_message_headers");
    SYM(header_get_last, "rd_kafka_header_get_last");
    SYM(list_new, "rd_kafka_topic_partition_list_new");
    SYM(list_add, "rd_kafka_topic_partition_list_add");
    SYM(list_destroy, "rd_kafka_topic_partition_list_destroy");
    SYM(assign, "rd_kafka_assign");
    SYM(position, "rd_kafka_position");
    SYM(pause_partitions, "rd_kafka_pause_partitions");
    SYM(consumer_close, "rd_kafka_consumer_close");
    SYM(destroy, "rd_kafka_destroy");
    SYM(err2str, "rd_kafka_err2str");
#undef SYM
    loaded = 1;
    Py_RETURN_NONE;
}

/* -- growable buffers --------------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_put(Buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL) return -1;
        b->data = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static PyObject *buf_bytes(Buf *b) {
    PyObject *out = PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len);
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    return out;
}

/* A header's value as a decimal integer; 0 when it is not one. */
static int parse_int(const void *value, size_t size, int64_t *out) {
    const char *s = value;
    size_t i = 0;
    int negative = 0;
    int64_t v = 0;
    if (size > 0 && (s[0] == '-' || s[0] == '+')) negative = s[i++] == '-';
    if (i == size || size - i > 18) return 0;
    for (; i < size; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = negative ? -v : v;
    return 1;
}

/* -- the consumer ----------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
} BlockConsumer;

static void consumer_release(BlockConsumer *self) {
    if (self->queue != NULL) {
        rk.queue_destroy(self->queue);
        self->queue = NULL;
    }
    if (self->rk != NULL) {
        rd_kafka_t *handle = self->rk;
        self->rk = NULL;
        Py_BEGIN_ALLOW_THREADS
        rk.consumer_close(handle);
        rk.destroy(handle);
        Py_END_ALLOW_THREADS
    }
}

static void consumer_dealloc(BlockConsumer *self) {
    consumer_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int consumer_init(BlockConsumer *self, PyObject *args, PyObject *kwds) {
    PyObject *config;
    char errstr[512];
    if (!loaded) {
        PyErr_SetString(PyExc_RuntimeError, "librdkafka is not loaded: call load(path) first");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!", &PyDict_Type, &config)) return -1;
    rd_kafka_conf_t *conf = rk.conf_new();
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(config, &pos, &key, &value)) {
        const char *k = PyUnicode_AsUTF8(key);
        const char *v = PyUnicode_AsUTF8(value);
        if (k == NULL || v == NULL) {
            rk.conf_destroy(conf);
            PyErr_SetString(PyExc_TypeError, "config keys and values must be str");
            return -1;
        }
        if (rk.conf_set(conf, k, v, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            rk.conf_destroy(conf);
            PyErr_Format(PyExc_ValueError, "%s", errstr);
            return -1;
        }
    }
    self->rk = rk.new_(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (self->rk == NULL) {
        rk.conf_destroy(conf);
        PyErr_Format(PyExc_ValueError, "%s", errstr);
        return -1;
    }
    rk.poll_set_consumer(self->rk);
    self->queue = rk.queue_get_consumer(self->rk);
    return 0;
}

/* [(partition, offset), ...] of ``topic`` as a partition list (offset -1001: none given). */
static rd_kafka_topic_partition_list_t *partition_list(const char *topic, PyObject *parts) {
    PyObject *seq = PySequence_Fast(parts, "partitions must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    rd_kafka_topic_partition_list_t *list = rk.list_new((int)n);
    for (Py_ssize_t i = 0; i < n; i++) {
        int partition;
        long long offset = -1001;
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (PyLong_Check(item)) {
            partition = (int)PyLong_AsLong(item);
        } else if (!PyArg_ParseTuple(item, "iL", &partition, &offset)) {
            rk.list_destroy(list);
            Py_DECREF(seq);
            return NULL;
        }
        rk.list_add(list, topic, partition)->offset = offset;
    }
    Py_DECREF(seq);
    if (PyErr_Occurred()) {
        rk.list_destroy(list);
        return NULL;
    }
    return list;
}

static int check_open(BlockConsumer *self) {
    if (self->rk == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the consumer is closed");
        return -1;
    }
    return 0;
}

/* ``apply`` (assign or pause) to the partitions named in args: (topic, partitions). */
static PyObject *apply_to_list(BlockConsumer *self, PyObject *args,
                               rd_kafka_resp_err_t (*apply)(rd_kafka_t *,
                                                            rd_kafka_topic_partition_list_t *),
                               const char *what) {
    const char *topic;
    PyObject *parts;
    if (check_open(self) || !PyArg_ParseTuple(args, "sO", &topic, &parts)) return NULL;
    rd_kafka_topic_partition_list_t *list = partition_list(topic, parts);
    if (list == NULL) return NULL;
    rd_kafka_resp_err_t err = apply(self->rk, list);
    rk.list_destroy(list);
    if (err) return PyErr_Format(PyExc_RuntimeError, "%s: %s", what, rk.err2str(err));
    Py_RETURN_NONE;
}

static PyObject *consumer_assign(BlockConsumer *self, PyObject *args) {
    return apply_to_list(self, args, rk.assign, "assign");
}

static PyObject *consumer_pause(BlockConsumer *self, PyObject *args) {
    return apply_to_list(self, args, rk.pause_partitions, "pause");
}

/* {partition: next offset to consume} (negative: none yet) of the given partitions. */
static PyObject *consumer_position(BlockConsumer *self, PyObject *args) {
    const char *topic;
    PyObject *parts;
    if (check_open(self) || !PyArg_ParseTuple(args, "sO", &topic, &parts)) return NULL;
    rd_kafka_topic_partition_list_t *list = partition_list(topic, parts);
    if (list == NULL) return NULL;
    rd_kafka_resp_err_t err = rk.position(self->rk, list);
    if (err) {
        rk.list_destroy(list);
        return PyErr_Format(PyExc_RuntimeError, "position: %s", rk.err2str(err));
    }
    PyObject *out = PyDict_New();
    for (int i = 0; out != NULL && i < list->cnt; i++) {
        PyObject *p = PyLong_FromLong(list->elems[i].partition);
        PyObject *o = PyLong_FromLongLong(list->elems[i].offset);
        if (p == NULL || o == NULL || PyDict_SetItem(out, p, o) < 0) Py_CLEAR(out);
        Py_XDECREF(p);
        Py_XDECREF(o);
    }
    rk.list_destroy(list);
    return out;
}

enum { FLAG_CONTROL = 1, FLAG_FENCE = 2, FLAG_BAD_EPOCH = 4, FLAG_BAD_FENCE = 8 };

/* One binary column: int64 offsets, data, and a byte per record (1: present). */
typedef struct {
    Buf offsets, data, valid;
} Column;

static int column_put(Column *c, const void *value, size_t size, int present) {
    char flag = (char)present;
    if (buf_put(&c->data, value, present ? size : 0)) return -1;
    int64_t end = (int64_t)c->data.len;
    return buf_put(&c->offsets, &end, sizeof end) || buf_put(&c->valid, &flag, 1);
}

static int column_start(Column *c) {
    int64_t zero = 0;
    return buf_put(&c->offsets, &zero, sizeof zero);
}

/*
 * consume(max_records, timeout_ms, id_header, epoch_header, control_header, fence_header)
 * -> None when nothing came, else a dict of bytes: partition (int32), offset (int64),
 * {id,key,value}_{offsets (int64, n + 1), data, valid (uint8)}, epoch (int64), epoch_valid
 * (uint8), fence (int64), flags (uint8: 1 control record, 2 fence record, 4 epoch not an
 * integer, 8 fence not an integer), and n. A record in error raises RuntimeError.
 */
static PyObject *consumer_consume(BlockConsumer *self, PyObject *args) {
    Py_ssize_t max_records;
    int timeout_ms;
    const char *id_name, *epoch_name, *control_name, *fence_name;
    if (check_open(self) || !PyArg_ParseTuple(args, "nissss", &max_records, &timeout_ms,
                                              &id_name, &epoch_name, &control_name,
                                              &fence_name))
        return NULL;
    if (max_records <= 0) return PyErr_Format(PyExc_ValueError, "max_records must be > 0");
    rd_kafka_message_t **msgs = malloc(sizeof *msgs * (size_t)max_records);
    if (msgs == NULL) return PyErr_NoMemory();
    ssize_t n;
    Py_BEGIN_ALLOW_THREADS
    n = rk.consume_batch_queue(self->queue, timeout_ms, msgs, (size_t)max_records);
    Py_END_ALLOW_THREADS
    if (n < 0) {
        free(msgs);
        return PyErr_Format(PyExc_RuntimeError, "consume failed (%zd)", n);
    }
    if (n == 0) {
        free(msgs);
        Py_RETURN_NONE;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (msgs[i]->err) {
            char detail[512] = "";
            size_t len = msgs[i]->len < sizeof detail - 1 ? msgs[i]->len : sizeof detail - 1;
            if (msgs[i]->payload != NULL) memcpy(detail, msgs[i]->payload, len);
            PyErr_Format(PyExc_RuntimeError, "partition %d: %s: %s", (int)msgs[i]->partition,
                         rk.err2str(msgs[i]->err), detail);
            for (ssize_t j = 0; j < n; j++) rk.message_destroy(msgs[j]);
            free(msgs);
            return NULL;
        }
    }
    Buf partitions = {0}, offsets = {0}, epochs = {0}, epoch_valid = {0}, fences = {0},
        flags = {0};
    Column ids = {{0}, {0}, {0}}, keys = {{0}, {0}, {0}}, values = {{0}, {0}, {0}};
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    failed = column_start(&ids) || column_start(&keys) || column_start(&values);
    for (ssize_t i = 0; i < n && !failed; i++) {
        rd_kafka_message_t *m = msgs[i];
        rd_kafka_headers_t *hdrs = NULL;
        const void *id = NULL, *epoch_raw = NULL, *fence_raw = NULL, *control = NULL;
        size_t id_size = 0, epoch_size = 0, fence_size = 0, control_size = 0;
        if (rk.message_headers(m, &hdrs) == 0 && hdrs != NULL) {
            if (rk.header_get_last(hdrs, id_name, &id, &id_size)) id = NULL;
            if (rk.header_get_last(hdrs, epoch_name, &epoch_raw, &epoch_size)) epoch_raw = NULL;
            if (rk.header_get_last(hdrs, fence_name, &fence_raw, &fence_size)) fence_raw = NULL;
            if (rk.header_get_last(hdrs, control_name, &control, &control_size)) control = NULL;
        }
        unsigned char flag = 0;
        char has_epoch = 0;
        int64_t epoch = 0, fence = 0;
        if (control != NULL) flag |= FLAG_CONTROL;
        if (epoch_raw != NULL) {
            if (parse_int(epoch_raw, epoch_size, &epoch)) has_epoch = 1;
            else flag |= FLAG_BAD_EPOCH;
        }
        if (fence_raw != NULL) {
            flag |= FLAG_FENCE;
            if (!parse_int(fence_raw, fence_size, &fence)) flag |= FLAG_BAD_FENCE;
        }
        failed = buf_put(&partitions, &m->partition, sizeof m->partition) ||
                 buf_put(&offsets, &m->offset, sizeof m->offset) ||
                 buf_put(&epochs, &epoch, sizeof epoch) ||
                 buf_put(&epoch_valid, &has_epoch, 1) || buf_put(&fences, &fence, sizeof fence) ||
                 buf_put(&flags, &flag, 1) || column_put(&ids, id, id_size, id != NULL) ||
                 column_put(&keys, m->key, m->key_len, m->key != NULL) ||
                 column_put(&values, m->payload, m->len, m->payload != NULL);
    }
    for (ssize_t i = 0; i < n; i++) rk.message_destroy(msgs[i]);
    Py_END_ALLOW_THREADS
    free(msgs);
    Buf *all[] = {&partitions,     &offsets,        &epochs,         &epoch_valid,
                  &fences,         &flags,          &ids.offsets,    &ids.data,
                  &ids.valid,      &keys.offsets,   &keys.data,      &keys.valid,
                  &values.offsets, &values.data,    &values.valid};
    const char *names[] = {"partition",     "offset",        "epoch",        "epoch_valid",
                           "fence",         "flags",         "id_offsets",   "id_data",
                           "id_valid",      "key_offsets",   "key_data",     "key_valid",
                           "value_offsets", "value_data",    "value_valid"};
    size_t count = sizeof all / sizeof all[0];
    if (failed) {
        for (size_t i = 0; i < count; i++) free(all[i]->data);
        return PyErr_NoMemory();
    }
    PyObject *out = PyDict_New();
    for (size_t i = 0; i < count; i++) {
        PyObject *bytes = buf_bytes(all[i]);
        if (out != NULL && (bytes == NULL || PyDict_SetItemString(out, names[i], bytes) < 0))
            Py_CLEAR(out);
        Py_XDECREF(bytes);
    }
    if (out != NULL) {
        PyObject *count_obj = PyLong_FromSsize_t(n);
        if (count_obj == NULL || PyDict_SetItemString(out, "n", count_obj) < 0) Py_CLEAR(out);
        Py_XDECREF(count_obj);
    }
    return out;
}

static PyObject *consumer_close(BlockConsumer *self, PyObject *Py_UNUSED(args)) {
    consumer_release(self);
    Py_RETURN_NONE;
}

static PyMethodDef consumer_methods[] = {
    {"assign", (PyCFunction)consumer_assign, METH_VARARGS,
     "assign(topic, [(partition, offset), ...]): read these partitions from these offsets"},
    {"pause", (PyCFunction)consumer_pause, METH_VARARGS,
     "pause(topic, [partition, ...]): fetch no more of these partitions"},
    {"position", (PyCFunction)consumer_position, METH_VARARGS,
     "position(topic, [partition, ...]) -> {partition: next offset}"},
    {"consume", (PyCFunction)consumer_consume, METH_VARARGS,
     "consume(max_records, timeout_ms, id, epoch, control, fence headers) -> block or None"},
    {"close", (PyCFunction)consumer_close, METH_NOARGS, "leave and free the consumer"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject BlockConsumerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "recovery_lib.kafka._block_consumer.BlockConsumer",
    .tp_basicsize = sizeof(BlockConsumer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A librdkafka consumer returning blocks of records as column buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)consumer_init,
    .tp_dealloc = (destructor)consumer_dealloc,
    .tp_methods = consumer_methods,
};

static PyMethodDef module_methods[] = {
    {"load", load, METH_VARARGS, "load(path): the librdkafka shared library to drive"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_block_consumer", "Blocks of Kafka records as column buffers.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__block_consumer(void) {
    if (PyType_Ready(&BlockConsumerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&BlockConsumerType);
    if (PyModule_AddObject(m, "BlockConsumer", (PyObject *)&BlockConsumerType) < 0) {
        Py_DECREF(&BlockConsumerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
