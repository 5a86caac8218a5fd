/* The fast engine's walk, in C: an HTML5 tree built by lexbor, written out as marked text.
 *
 * dedup/html_text.py defines what the text is (the reference engine walks a BeautifulSoup tree
 * the same way); this module only does that walk without a Python object per node. lexbor is
 * not linked here: selectolax carries it and exports its functions, and dedup/lexbor_text.py looks
 * their addresses up with ctypes and hands them to bind(). So this file needs no lexbor headers, only
 * the handful of prototypes below, all of them lexbor's stable "_noi" (no-inline) entry points or
 * plain functions, and it treats every lexbor object as opaque.
 *
 *   bind(functions: tuple[int, ...])                        lexbor's function addresses, once
 *   kinds(block, removed, pre) -> capsule                  the tag name sets of one walker
 *   marked_text(kinds, data: bytes, lines: bool, max_depth: int) -> bytes | None
 *       the walk of one UTF-8 document; None when its elements nest deeper than max_depth
 *   fits(kinds, data: bytes, max_depth: int) -> bool
 *       whether marked_text() gives text, not None: the same parse and walk, writing nothing
 *   tree_text(kinds, roots, skip, lines: bool, max_depth: int, around: bool) -> bytes | None
 *       the walk of a tree parsed already (selectolax's, for a content area): only the subtrees
 *       of roots, a sequence of (node address, elements above it, pre-formatted ones among them),
 *       each between two marks if around; without the elements whose address is in skip
 *
 * The depth limit is there because building an HTML5 tree costs time quadratic in its depth
 * (every start tag looks up the stack of open elements): a 1 MB page of nested <div>s would take
 * seconds. So the document is parsed in chunks, and parsing stops as soon as the tree grows too
 * deep; the walk checks the finished tree once more, so that the rule is exactly "no element
 * deeper than max_depth", as the reference engine checks it. (The check during parsing follows
 * last children, where the parser inserts; what it cannot see is the content of a <template>,
 * which lexbor keeps apart from the tree and the walk skips anyway.)
 *
 * tree_text() trusts its addresses: they are selectolax's mem_id of nodes of one tree, which the
 * caller keeps alive (and unchanged) during the call.
 *
 * The GIL is released while a document is parsed and walked. Each thread keeps one lexbor
 * document and parses into it again and again: making a document and its parser anew costs
 * about 50 microseconds, as much as parsing a few kilobytes.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef void lxb_document;
typedef void lxb_node;
typedef uintptr_t lxb_tag_id;

/* the lexbor functions used, in the order bind() receives their addresses */
static lxb_document *(*document_create)(void);
static void (*document_clean)(lxb_document *);
static unsigned int (*parse_chunk_begin)(lxb_document *);
static unsigned int (*parse_chunk)(lxb_document *, const unsigned char *, size_t);
static unsigned int (*parse_chunk_end)(lxb_document *);
static lxb_document *(*document_destroy)(lxb_document *);
static lxb_node *(*node_first_child)(lxb_node *);
static lxb_node *(*node_last_child)(lxb_node *);
static lxb_node *(*node_next)(lxb_node *);
static lxb_node *(*node_parent)(lxb_node *);
static unsigned int (*node_type)(lxb_node *);
static lxb_tag_id (*node_tag_id)(lxb_node *);
static const unsigned char *(*element_local_name)(lxb_node *, size_t *);
static unsigned char *(*node_text_content)(lxb_node *, size_t *);
static void (*document_destroy_text)(lxb_document *, unsigned char *);

enum { FUNCTIONS = 15 };
enum { TYPE_ELEMENT = 1, TYPE_TEXT = 3 }; /* the DOM's node type numbers, which lexbor keeps */

/* what an element is to the walk: bit flags, from the three tag name sets */
enum { KIND_BLOCK = 1, KIND_REMOVED = 2, KIND_PRE = 4, KIND_KNOWN = 128 };

#define NAMES_MAX 128
typedef struct {
    int count;
    char *names[NAMES_MAX];
} name_set;

static int bound = 0;

/* lexbor numbers the tags it knows from 1 up (a few hundred); a custom element's id is an address,
 * far outside that range. Kinds of the small ids are cached once their name has been read; every
 * name in the three sets is a tag lexbor knows, so a custom element is always inline. */
#define CACHED_IDS 1024

/* one walker's tag name sets, and what it has learnt of lexbor's tag ids */
typedef struct {
    name_set block, removed, pre;
    unsigned char cache[CACHED_IDS];
} tag_kinds;

static const char KINDS_CAPSULE[] = "dedup._lexbor_text.kinds";

static const char BREAK[] = "\xef\xb7\x90"; /* U+FDD0 in UTF-8: html_text.BREAK */

static int set_has(const name_set *set, const unsigned char *name, size_t length)
{
    for (int i = 0; i < set->count; i++) {
        if (strlen(set->names[i]) == length && memcmp(set->names[i], name, length) == 0)
            return 1;
    }
    return 0;
}

static unsigned char kind_of(tag_kinds *kinds, lxb_node *element)
{
    lxb_tag_id id = node_tag_id(element);
    if (id < CACHED_IDS && kinds->cache[id])
        return kinds->cache[id];
    size_t length = 0;
    const unsigned char *name = element_local_name(element, &length);
    unsigned char kind = KIND_KNOWN;
    if (name != NULL) {
        if (set_has(&kinds->block, name, length))
            kind |= KIND_BLOCK;
        if (set_has(&kinds->removed, name, length))
            kind |= KIND_REMOVED;
        if (set_has(&kinds->pre, name, length))
            kind |= KIND_PRE;
    }
    if (id < CACHED_IDS)
        kinds->cache[id] = kind; /* idempotent: threads racing here write the same byte */
    return kind;
}

/* a growing output buffer; on allocation failure it stops growing and remembers it */
typedef struct {
    char *data;
    size_t length, capacity;
    int failed;
} buffer;

static void put(buffer *out, const char *bytes, size_t length)
{
    if (out->failed)
        return;
    if (out->length + length > out->capacity) {
        size_t capacity = out->capacity ? out->capacity : 4096;
        while (capacity < out->length + length)
            capacity *= 2;
        char *grown = realloc(out->data, capacity);
        if (grown == NULL) {
            out->failed = 1;
            return;
        }
        out->data = grown;
        out->capacity = capacity;
    }
    memcpy(out->data + out->length, bytes, length);
    out->length += length;
}

/* text inside a pre-formatted element, where every CR and LF is a line break */
static void put_pre(buffer *out, const char *text, size_t length)
{
    size_t start = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] == '\n' || text[i] == '\r') {
            put(out, text + start, i - start);
            put(out, BREAK, 3);
            start = i + 1;
        }
    }
    put(out, text + start, length - start);
}

static void put_text(buffer *out, lxb_document *document, lxb_node *node, int pre)
{
    size_t length = 0;
    unsigned char *text = node_text_content(node, &length);
    if (text == NULL)
        return;
    if (pre)
        put_pre(out, (const char *)text, length);
    else
        put(out, (const char *)text, length);
    document_destroy_text(document, text);
}

/* Leaving an element: the mark after a block, one pre-formatted level fewer. */
static void leave(tag_kinds *kinds, buffer *out, lxb_node *node, const char *mark,
                  size_t mark_length, int *pre)
{
    if (node_type(node) != TYPE_ELEMENT)
        return;
    unsigned char kind = kind_of(kinds, node);
    if (kind & KIND_BLOCK)
        put(out, mark, mark_length);
    if (kind & KIND_PRE)
        (*pre)--;
}

/* the elements a walk leaves out besides the removed ones: node addresses, sorted */
typedef struct {
    uintptr_t *addresses;
    size_t count;
} node_set;

static int compare_addresses(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

static int set_holds(const node_set *set, lxb_node *node)
{
    uintptr_t address = (uintptr_t)node;
    size_t low = 0, high = set->count; /* bisection */
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (set->addresses[middle] < address)
            low = middle + 1;
        else
            high = middle;
    }
    return low < set->count && set->addresses[low] == address;
}

/* what one walk writes, and with what */
typedef struct {
    tag_kinds *kinds;
    lxb_document *document;
    buffer *out;
    int lines;
    size_t max_depth;
    const node_set *skip;
    int text; /* 0: the walk only checks the depth, its text is not wanted */
    const char *mark;
    size_t mark_length;
} walker;

/* The subtree of top (top included) in document order, iteratively: text where it stands, a mark
 * before and after each block's content, nothing of removed or skipped elements, comments,
 * doctypes or processing instructions. depth: the elements above top; pre: the pre-formatted
 * ones among them. Returns 0, or -1 at an element deeper than max_depth. */
static int walk(const walker *w, lxb_node *top, size_t depth, int pre)
{
    /* the walker's fields as locals: the compiler keeps them in registers across the writes */
    tag_kinds *kinds = w->kinds;
    buffer *out = w->out;
    const char *mark = w->mark;
    size_t mark_length = w->mark_length, max_depth = w->max_depth;
    const node_set *skip = w->skip->count ? w->skip : NULL;
    int text = w->text, lines = w->lines;
    lxb_node *node = top;
    while (node != NULL) {
        lxb_node *child = NULL;
        unsigned int type = node_type(node);
        if (type == TYPE_TEXT) {
            if (text)
                put_text(out, w->document, node, lines && pre > 0);
        } else if (type == TYPE_ELEMENT) {
            if (depth + 1 > max_depth)
                return -1;
            unsigned char kind = kind_of(kinds, node);
            if (!(kind & KIND_REMOVED) && !(skip && set_holds(skip, node))) {
                if (kind & KIND_BLOCK)
                    put(out, mark, mark_length);
                if (kind & KIND_PRE)
                    pre++;
                child = node_first_child(node);
                if (child == NULL)
                    leave(kinds, out, node, mark, mark_length, &pre);
            }
        }
        if (child != NULL) {
            depth++;
            node = child;
            continue;
        }
        /* no way down: the next sibling, else up, leaving each element on the way */
        while (node != top && node_next(node) == NULL) {
            node = node_parent(node);
            if (node == NULL)
                return 0;
            depth--;
            leave(kinds, out, node, mark, mark_length, &pre);
        }
        node = node == top ? NULL : node_next(node);
    }
    return 0;
}

static void start_walker(walker *w, tag_kinds *kinds, lxb_document *document, buffer *out,
                         int lines, size_t max_depth, const node_set *skip)
{
    w->kinds = kinds;
    w->document = document;
    w->out = out;
    w->lines = lines;
    w->max_depth = max_depth;
    w->skip = skip;
    w->text = 1;
    w->mark = lines ? BREAK : "\n";
    w->mark_length = lines ? 3 : 1;
}

/* The whole document: each of its children (a document begins with its node). out NULL: only
 * the depth is checked. */
static int walk_document(tag_kinds *kinds, lxb_document *document, buffer *out, int lines,
                         size_t max_depth)
{
    static const node_set nothing = {NULL, 0};
    buffer nowhere = {NULL, 0, 0, 1}; /* takes nothing: put() ignores a buffer that failed */
    walker w;
    start_walker(&w, kinds, document, out != NULL ? out : &nowhere, lines, max_depth, &nothing);
    w.text = out != NULL;
    for (lxb_node *node = node_first_child((lxb_node *)document); node != NULL;
         node = node_next(node)) {
        if (walk(&w, node, 0, 0) != 0)
            return -1;
    }
    return 0;
}

/* one root of a rooted walk, as tree_text() receives it */
typedef struct {
    lxb_node *node;
    size_t depth;
    int pre;
} root;

/* The roots' subtrees in turn, each between two marks if around. */
static int walk_roots(tag_kinds *kinds, const root *roots, size_t count, const node_set *skip,
                      buffer *out, int lines, size_t max_depth, int around)
{
    if (count == 0)
        return 0;
    lxb_document *document = roots[0].node; /* the tree's top: its document */
    for (lxb_node *above = node_parent(document); above != NULL; above = node_parent(above))
        document = above;
    walker w;
    start_walker(&w, kinds, document, out, lines, max_depth, skip);
    for (size_t i = 0; i < count; i++) {
        if (around)
            put(out, w.mark, w.mark_length);
        if (walk(&w, roots[i].node, roots[i].depth, roots[i].pre) != 0)
            return -1;
        if (around)
            put(out, w.mark, w.mark_length);
    }
    return 0;
}

/* How deep the tree being built reaches along its last children: where the parser inserts. */
static size_t open_depth(lxb_document *document, size_t max_depth)
{
    size_t depth = 0;
    lxb_node *node = node_last_child((lxb_node *)document);
    while (node != NULL && depth <= max_depth) {
        if (node_type(node) == TYPE_ELEMENT)
            depth++;
        node = node_last_child(node);
    }
    return depth;
}

enum { PARSED = 0, FAILED = 1, TOO_DEEP = 2 };
#define CHUNK 16384

static int parse(lxb_document *document, const unsigned char *data, size_t length,
                 size_t max_depth)
{
    if (parse_chunk_begin(document) != 0)
        return FAILED;
    int result = PARSED;
    for (size_t at = 0; at < length && result == PARSED; at += CHUNK) {
        size_t size = length - at < CHUNK ? length - at : CHUNK;
        if (parse_chunk(document, data + at, size) != 0)
            result = FAILED;
        else if (open_depth(document, max_depth) > max_depth)
            result = TOO_DEEP;
    }
    if (parse_chunk_end(document) != 0 && result == PARSED)
        result = FAILED;
    return result;
}

/* -- one document per thread, made once -------------------------------------------------------- */

static pthread_key_t document_key;
static pthread_once_t document_key_once = PTHREAD_ONCE_INIT;

static void destroy_thread_document(void *document)
{
    document_destroy(document);
}

static void make_document_key(void)
{
    (void)pthread_key_create(&document_key, destroy_thread_document);
}

/* a document past this size is not kept: its memory would stay with the thread */
#define KEEP_AFTER_BYTES (1 << 20)

static lxb_document *thread_document(void)
{
    pthread_once(&document_key_once, make_document_key);
    lxb_document *document = pthread_getspecific(document_key);
    if (document == NULL) {
        document = document_create();
        if (document != NULL && pthread_setspecific(document_key, document) != 0) {
            document_destroy(document);
            document = NULL;
        }
    }
    return document;
}

static void done_with(lxb_document *document, size_t parsed_bytes)
{
    if (parsed_bytes > KEEP_AFTER_BYTES) {
        pthread_setspecific(document_key, NULL);
        document_destroy(document);
    } else {
        document_clean(document);
    }
}

static int fill_set(name_set *set, PyObject *names)
{
    PyObject *sequence = PySequence_Fast(names, "tag names must be a sequence of str");
    if (sequence == NULL)
        return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
    if (count > NAMES_MAX) {
        Py_DECREF(sequence);
        PyErr_SetString(PyExc_ValueError, "too many tag names");
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        const char *name = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(sequence, i));
        char *copy = name == NULL ? NULL : strdup(name);
        if (copy == NULL) {
            Py_DECREF(sequence);
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            return -1;
        }
        set->names[set->count++] = copy;
    }
    Py_DECREF(sequence);
    return 0;
}

static void free_kinds(PyObject *capsule)
{
    tag_kinds *kinds = PyCapsule_GetPointer(capsule, KINDS_CAPSULE);
    if (kinds == NULL)
        return;
    name_set *sets[] = {&kinds->block, &kinds->removed, &kinds->pre};
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < sets[s]->count; i++)
            free(sets[s]->names[i]);
    }
    free(kinds);
}

static PyObject *kinds(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *block, *removed, *pre;
    if (!PyArg_ParseTuple(args, "OOO", &block, &removed, &pre))
        return NULL;
    tag_kinds *made = calloc(1, sizeof *made);
    if (made == NULL)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(made, KINDS_CAPSULE, free_kinds);
    if (capsule == NULL) {
        free(made);
        return NULL;
    }
    if (fill_set(&made->block, block) || fill_set(&made->removed, removed)
        || fill_set(&made->pre, pre)) {
        Py_DECREF(capsule); /* frees what was filled */
        return NULL;
    }
    return capsule;
}

static PyObject *bind(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *functions;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &functions))
        return NULL;
    if (PyTuple_GET_SIZE(functions) != FUNCTIONS) {
        PyErr_Format(PyExc_ValueError, "bind() takes %d function addresses", FUNCTIONS);
        return NULL;
    }
    void *address[FUNCTIONS];
    for (int i = 0; i < FUNCTIONS; i++) {
        address[i] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(functions, i));
        if (address[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a function address is NULL");
            return NULL;
        }
    }
    document_create = address[0];
    document_clean = address[1];
    parse_chunk_begin = address[2];
    parse_chunk = address[3];
    parse_chunk_end = address[4];
    document_destroy = address[5];
    node_first_child = address[6];
    node_last_child = address[7];
    node_next = address[8];
    node_parent = address[9];
    node_type = address[10];
    node_tag_id = address[11];
    element_local_name = address[12];
    node_text_content = address[13];
    document_destroy_text = address[14];
    bound = 1;
    Py_RETURN_NONE;
}

/* Parses data into this thread's document and walks it, writing to out (NULL: only the depth is
 * checked); PARSED, FAILED or TOO_DEEP. Runs without the GIL. */
static int parse_and_walk(tag_kinds *kinds, const Py_buffer *data, int lines, size_t limit,
                          buffer *out)
{
    lxb_document *document = thread_document();
    if (document == NULL)
        return FAILED;
    int status = parse(document, data->buf, (size_t)data->len, limit);
    if (status == PARSED && walk_document(kinds, document, out, lines, limit) != 0)
        status = TOO_DEEP;
    done_with(document, (size_t)data->len);
    return status;
}

/* The arguments marked_text() and fits() share; NULL kinds with an error set (data released). */
static tag_kinds *document_arguments(PyObject *capsule, Py_buffer *data)
{
    tag_kinds *kinds = PyCapsule_GetPointer(capsule, KINDS_CAPSULE);
    if (kinds != NULL && !bound) {
        PyErr_SetString(PyExc_RuntimeError, "bind() has not been called");
        kinds = NULL;
    }
    if (kinds == NULL)
        PyBuffer_Release(data);
    return kinds;
}

/* A walk's result for Python, its buffer freed: None when the tree was too deep, else the text
 * (MemoryError when the buffer could not grow). */
static PyObject *walked_text(int too_deep, buffer *out)
{
    PyObject *result = NULL;
    if (too_deep)
        result = Py_NewRef(Py_None);
    else if (out->failed)
        PyErr_NoMemory();
    else
        result = PyBytes_FromStringAndSize(out->data, (Py_ssize_t)out->length);
    free(out->data);
    return result;
}

static PyObject *marked_text(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *capsule;
    Py_buffer data;
    int lines;
    Py_ssize_t max_depth;
    if (!PyArg_ParseTuple(args, "Oy*pn", &capsule, &data, &lines, &max_depth))
        return NULL;
    tag_kinds *kinds = document_arguments(capsule, &data);
    if (kinds == NULL)
        return NULL;
    buffer out = {NULL, 0, 0, 0};
    int status;
    size_t limit = max_depth < 0 ? 0 : (size_t)max_depth;
    Py_BEGIN_ALLOW_THREADS
    status = parse_and_walk(kinds, &data, lines, limit, &out);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (status == FAILED) {
        free(out.data);
        PyErr_SetString(PyExc_MemoryError, "lexbor could not parse the document");
        return NULL;
    }
    return walked_text(status == TOO_DEEP, &out);
}

static PyObject *fits(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *capsule;
    Py_buffer data;
    Py_ssize_t max_depth;
    if (!PyArg_ParseTuple(args, "Oy*n", &capsule, &data, &max_depth))
        return NULL;
    tag_kinds *kinds = document_arguments(capsule, &data);
    if (kinds == NULL)
        return NULL;
    int status;
    size_t limit = max_depth < 0 ? 0 : (size_t)max_depth;
    Py_BEGIN_ALLOW_THREADS
    status = parse_and_walk(kinds, &data, 0, limit, NULL);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (status == FAILED) {
        PyErr_SetString(PyExc_MemoryError, "lexbor could not parse the document");
        return NULL;
    }
    return PyBool_FromLong(status == PARSED);
}

/* a node address from Python (an int, not 0); for PyArg_ParseTuple's "O&" */
static int read_address(PyObject *number, void *address)
{
    void *node = PyLong_AsVoidPtr(number);
    if (node == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a node address is 0");
        return 0;
    }
    *(void **)address = node;
    return 1;
}

/* The roots of tree_text() from Python's (address, depth, pre) tuples; NULL with an error set. */
static root *read_roots(PyObject *sequence, size_t *count)
{
    PyObject *items = PySequence_Fast(sequence, "roots must be a sequence of (int, int, int)");
    if (items == NULL)
        return NULL;
    Py_ssize_t length = PySequence_Fast_GET_SIZE(items);
    root *roots = malloc((size_t)(length ? length : 1) * sizeof *roots);
    if (roots == NULL) {
        Py_DECREF(items);
        return (root *)PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < length; i++) {
        void *node;
        Py_ssize_t depth;
        int pre;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "O&ni;a root is (int, int, int)",
                              read_address, &node, &depth, &pre)) {
            free(roots);
            Py_DECREF(items);
            return NULL;
        }
        if (depth < 0 || pre < 0) {
            free(roots);
            Py_DECREF(items);
            PyErr_SetString(PyExc_ValueError, "a root's depth and pre count are not negative");
            return NULL;
        }
        roots[i] = (root){node, (size_t)depth, pre};
    }
    Py_DECREF(items);
    *count = (size_t)length;
    return roots;
}

/* The skipped nodes of tree_text(), sorted for bisection; -1 with an error set. */
static int read_skip(PyObject *sequence, node_set *set)
{
    PyObject *items = PySequence_Fast(sequence, "skip must be a sequence of int");
    if (items == NULL)
        return -1;
    Py_ssize_t length = PySequence_Fast_GET_SIZE(items);
    set->addresses = malloc((size_t)(length ? length : 1) * sizeof *set->addresses);
    set->count = 0;
    if (set->addresses == NULL) {
        Py_DECREF(items);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < length; i++) {
        void *node;
        if (!read_address(PySequence_Fast_GET_ITEM(items, i), &node)) {
            Py_DECREF(items);
            return -1;
        }
        set->addresses[set->count++] = (uintptr_t)node;
    }
    Py_DECREF(items);
    qsort(set->addresses, set->count, sizeof *set->addresses, compare_addresses);
    return 0;
}

static PyObject *tree_text(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *capsule, *root_list, *skip_list;
    int lines, around;
    Py_ssize_t max_depth;
    if (!PyArg_ParseTuple(args, "OOOpnp", &capsule, &root_list, &skip_list, &lines, &max_depth,
                          &around))
        return NULL;
    tag_kinds *kinds = PyCapsule_GetPointer(capsule, KINDS_CAPSULE);
    if (kinds == NULL)
        return NULL;
    if (!bound) {
        PyErr_SetString(PyExc_RuntimeError, "bind() has not been called");
        return NULL;
    }
    size_t count = 0;
    root *roots = read_roots(root_list, &count);
    if (roots == NULL)
        return NULL;
    node_set skip = {NULL, 0};
    if (read_skip(skip_list, &skip) != 0) {
        free(skip.addresses);
        free(roots);
        return NULL;
    }
    buffer out = {NULL, 0, 0, 0};
    int status;
    size_t limit = max_depth < 0 ? 0 : (size_t)max_depth;
    Py_BEGIN_ALLOW_THREADS
    status = walk_roots(kinds, roots, count, &skip, &out, lines, limit, around);
    Py_END_ALLOW_THREADS
    free(skip.addresses);
    free(roots);
    return walked_text(status != 0, &out);
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(functions): lexbor's function addresses"},
    {"kinds", kinds, METH_VARARGS,
     "kinds(block, removed, pre) -> capsule: the tag name sets of one walker"},
    {"marked_text", marked_text, METH_VARARGS,
     "marked_text(kinds, data, lines, max_depth) -> bytes | None: the marked text of one UTF-8 "
     "HTML document, None if it nests deeper than max_depth"},
    {"fits", fits, METH_VARARGS,
     "fits(kinds, data, max_depth) -> bool: whether marked_text() would give text, not None (the "
     "same parse and walk, without the text)"},
    {"tree_text", tree_text, METH_VARARGS,
     "tree_text(kinds, roots, skip, lines, max_depth, around) -> bytes | None: the marked text "
     "of roots ((node address, depth, pre) of a parsed tree) without the nodes in skip, None if "
     "an element is deeper than max_depth"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "dedup._lexbor_text",
    "The fast engine's tree walk in C, over lexbor (see dedup.html_text).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lexbor_text(void)
{
    return PyModule_Create(&module);
}
