"""The greedy-clustering index (:class:`dedup.index.ClusterIndex`) kept in Redis, for one dedup
decision across the nodes of a distributed crawl.

Every node runs the same :class:`dedup.cluster.GreedyClusterer` over this index; what makes their
decisions one decision is how each is committed. :meth:`RedisIndex.assign` decides and writes a
page in one optimistic transaction (Redis's ``WATCH``/``MULTI``/``EXEC``):

1. ``WATCH`` the keys the decision reads: the posting buckets of the page's fingerprints, the
   bucket of its content hash, the bucket of its key (URL);
2. read them: one script call returns any decision already recorded for the key, else the
   exact-hash entry (and for an exact duplicate its cluster), else the postings;
3. decide in Python (``GreedyClusterer.decide``) and collect the writes
   (``GreedyClusterer.write``; nothing of the clusterer's own state changes yet);
4. ``MULTI``, one script that applies the writes and takes the global order number (``INCR``),
   ``EXEC``. If another node changed a watched key since step 1, ``EXEC`` does nothing and the
   whole decision is made again, on what is there now.

That is three round trips to Redis a decision (``WATCH``, the read, ``MULTI`` … ``EXEC``), and one
more for each candidate whose representative this process has not read before.

**Why two near copies decided at the same instant cannot both be kept.** Let A and B be pages
whose estimated resemblance reaches the threshold ``t``. A kept page is indexed under part of
its fingerprints, :func:`dedup.cluster.indexed_count` of them, and any part of that size holds
a fingerprint that B shares, by the pigeonhole argument in that function's docstring: at most
``|A| − ⌈t·|A|⌉`` of A's fingerprints are unshared and more than that many are indexed. So A's
transaction writes a posting bucket that B's transaction watches (B watches the buckets of all
its own fingerprints), and the same holds the other way round. Redis runs transactions one at
a time; take the one that commits first, say A's. Either it committed before B's ``WATCH``, and
B reads A's posting and finds A (the clusterer estimates every candidate that can reach ``t``),
or it committed after, and B's ``EXEC`` fails and B decides again, now reading A. Exact copies
meet the same way through the bucket of their content hash. Buckets group keys, so a
transaction may also be retried because an unrelated key of a watched bucket changed; that costs
a retry, never a wrong decision.

**One global order.** Each committed decision takes the next number of the ``order`` counter
inside its transaction, so the numbers are the order in which Redis serialised the decisions,
and replaying the pages in that order through one process (``MemoryIndex``, ``LmdbIndex``)
decides every page as here. Exactly so for one node; with several, each node picks the part
of its new representatives to index from its own fingerprint counts (the rarest, a heuristic
of :class:`dedup.frequency.FingerprintFrequency`), so a replay may estimate other candidates on
the way, but finds the same clusters: every cluster a page can reach is found whatever part is
indexed, unless the ``cap`` cut a boilerplate fingerprint's list of clusters.

The order number is the document's id in this index (cluster ids are 0, 1, 2, … in order of
creation, as in the other indexes); a node keeps it with its own document so that the stores of
all nodes can be merged in the crawl's order.

**A decision recorded per key.** The transaction also records, under the caller's key (the
page's URL), the decision, its order number and the node. A node killed after ``EXEC`` but
before its own store committed the page fetches the page again when it restarts; ``assign``
then finds the key and returns the recorded decision (``adopted``) instead of deciding the
page again, which would find the page's own first decision and call it a duplicate of itself.
The same makes a retry after a lost connection safe: if the lost ``EXEC`` had committed, the
retry adopts it.

**What Redis holds**, under one key prefix (see :data:`KEYS`; ids are decimal strings):

* ``p:<bucket>`` hash: fingerprint (8 bytes) → the clusters whose representative is indexed
  under it, comma-separated;
* ``x:<bucket>`` hash: content hash (8 bytes) → ``doc,cluster`` of its first document;
* ``k:<bucket>`` hash: 16-byte BLAKE2b of a key → the order number it was decided at;
* ``g:<order // 128>`` hash: order number → ``cluster:`` and the packed decision, node and key;
* ``h:<cluster // 128>`` hash: cluster id → ``first,size,identical``;
* ``c:<cluster>`` string: the representative sketch (``Sketch.to_bytes``);
* ``m:<cluster>`` string: the recorded member sketches ("popular" representative only);
* ``meta`` hash, ``order`` and ``clusters`` counters.

Small hashes are what keep this compact: Redis stores a hash of a few hundred short fields as
one flat listpack (``hash-max-listpack-entries``, 512, and ``-value``, 64 bytes), about 15 bytes
a posting instead of the ~70 bytes of a key of its own. Fingerprints, hashes and key digests are spread over
``2**bucket_bits`` buckets by :func:`dedup.frequency.multiply_shift` (sketch values are the
*smallest* of a page's ids, so their own high bits would all land in a few buckets).
``bucket_bits`` is fixed when the index is created: about ``log2(postings / 100)`` for the crawl
one expects (see ``docs/distributed.md``). A kept page costs its representative (``8·s`` bytes
and a key), its indexed postings (23 at MIN_100 and threshold 0.8), its head, its exact hash
and its record; a dropped page costs its record, exact hash and key digest.
``benchmarks/distributed.py`` measures it.

Writes happen only inside :meth:`RedisIndex.assign` (the protocol's writing methods collect
them); reads work anywhere. With the "first" representative a cluster's sketch never changes,
so the sketches read are cached; with "popular" they are watched and read afresh.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import redis

from dedup.cluster import KINDS, Assignment, Decision
from dedup.frequency import multiply_shift
from dedup.index import Candidates, ClusterInfo
from dedup.sketches import Sketch, sketch_from_bytes

if TYPE_CHECKING:
    from dedup.cluster import GreedyClusterer

__all__ = ["DEFAULT_BUCKET_BITS", "KEYS", "GlobalDecision", "RedisIndex"]

#: the key templates under the index's prefix, in one place (``%d``: a bucket or an id)
KEYS = {
    "meta": "meta",
    "order": "order",
    "clusters": "clusters",
    "postings": "p:%d",
    "exact": "x:%d",
    "keys": "k:%d",
    "documents": "g:%d",
    "heads": "h:%d",
    "sketch": "c:%d",
    "members": "m:%d",
}
#: 2**20 buckets: about 100 postings each at 8 million kept pages (13 postings each at MIN_100
#: and threshold 0.9), still listpacks at 40 million
DEFAULT_BUCKET_BITS = 20
#: ids per ``g:`` and ``h:`` hash, well within ``hash-max-listpack-entries``
_PER_ID_BUCKET = 128
#: stand-ins for the ids only the committing script knows (valid ids are below 2**63)
_PENDING_DOC = 2**63
_PENDING_CLUSTER = 2**63 + 1
_ID_TOKENS = {_PENDING_DOC: b"D", _PENDING_CLUSTER: b"C"}
#: node, kind, flags, representative doc, duplicate of, resemblance, containment, matches,
#: sample size, candidates, pruned, capped; the key's UTF-8 follows
_RECORD = struct.Struct(">HBBqqddqqIII")
_IDENTICAL, _HAS_RESEMBLANCE, _HAS_CONTAINMENT = 1, 2, 4
_FP = struct.Struct(">Q")
#: a decision whose transaction keeps failing this often is a bug, not contention
_MAX_ATTEMPTS = 1000

# Read-only: any recorded decision of the key; else the exact-hash entry, and then (an exact
# duplicate needs nothing else) its cluster's representative and head when asked (ARGV[6]: the
# "first" rule, under which they never change), or else the postings. KEYS: key bucket, exact
# bucket; ARGV: prefix, key digest, exact field, the fingerprints (8 bytes each, concatenated),
# their buckets (comma-separated), '1' to read an exact duplicate's cluster. Returns the key's
# order (or false) and its record, or false, the exact entry (or false), the cluster's sketch
# and head (or false, false), then (position, postings) of each fingerprint with postings: most
# have none, so the reply stays short.
_READ = """
local doc = redis.call('HGET', KEYS[1], ARGV[2])
if doc then
  local bucket = string.format('%d', math.floor(tonumber(doc) / @PER@))
  return {doc, redis.call('HGET', ARGV[1] .. '@DOCUMENTS@' .. bucket, doc)}
end
local exact = redis.call('HGET', KEYS[2], ARGV[3])
if exact then
  local sketch, head = false, false
  if ARGV[6] == '1' then
    local cluster = string.match(exact, ',(%d+)$')
    local bucket = string.format('%d', math.floor(tonumber(cluster) / @PER@))
    sketch = redis.call('GET', ARGV[1] .. '@SKETCH@' .. cluster)
    head = redis.call('HGET', ARGV[1] .. '@HEADS@' .. bucket, cluster)
  end
  return {false, exact, sketch, head}
end
local out = {false, false, false, false}
local fields, postings, i = ARGV[4], ARGV[1] .. '@POSTINGS@', 0
for bucket in string.gmatch(ARGV[5], '%d+') do
  i = i + 1
  local value = redis.call('HGET', postings .. bucket, string.sub(fields, 8 * i - 7, 8 * i))
  if value then
    out[#out + 1] = i
    out[#out + 1] = value
  end
end
return out
"""

# One cluster's representative and head. KEYS: sketch key, head bucket; ARGV: cluster id.
_READ_CLUSTER = """
return {redis.call('GET', KEYS[1]), redis.call('HGET', KEYS[2], ARGV[1])}
"""

# The index need and the number of clusters, read at one instant: a node starting while another
# keeps the crawl's first page must not see the cluster without the need recorded with it.
# KEYS: meta, clusters counter.
_READ_NEED = """
return {redis.call('HGET', KEYS[1], 'need'), redis.call('GET', KEYS[2])}
"""

# The writes of one decision, run inside MULTI/EXEC. It takes the order number (the document's
# id) and, for a kept page, the cluster id, and puts them where the ops say D and C; everything
# else was decided in Python. ARGV: prefix, then ops (a name and its arguments each).
_WRITE = """
local prefix = ARGV[1]
local doc = redis.call('INCR', prefix .. '@ORDER@')
local cluster = -1
local function id(token)
  if token == 'D' then return string.format('%d', doc) end
  if token == 'C' then return string.format('%d', cluster) end
  return token
end
local function per_id(template, value)
  return prefix .. template .. string.format('%d', math.floor(tonumber(value) / @PER@))
end
local i = 2
while i <= #ARGV do
  local op = ARGV[i]
  if op == 'new' then
    cluster = redis.call('INCR', prefix .. '@CLUSTERS@') - 1
    local c = id('C')
    redis.call('SET', prefix .. '@SKETCH@' .. c, ARGV[i + 1])
    redis.call('HSET', per_id('@HEADS@', c), c, id('D') .. ',1,1')
    i = i + 2
  elseif op == 'post' or op == 'unpost' then
    -- ARGV[i + 1]: buckets (comma-separated), [i + 2]: fingerprints (8 bytes each), [i + 3]: id
    local c, fields, n = id(ARGV[i + 3]), ARGV[i + 2], 0
    for bucket in string.gmatch(ARGV[i + 1], '%d+') do
      n = n + 1
      local key, fp = prefix .. '@POSTINGS@' .. bucket, string.sub(fields, 8 * n - 7, 8 * n)
      local old = redis.call('HGET', key, fp)
      if op == 'post' then
        redis.call('HSET', key, fp, old and (old .. ',' .. c) or c)
      elseif old then
        local kept = {}
        for other in string.gmatch(old, '%d+') do
          if other ~= c then kept[#kept + 1] = other end
        end
        if #kept > 0 then
          redis.call('HSET', key, fp, table.concat(kept, ','))
        else
          redis.call('HDEL', key, fp)
        end
      end
    end
    i = i + 4
  elseif op == 'exact' then
    redis.call('HSETNX', ARGV[i + 1], ARGV[i + 2], id(ARGV[i + 3]) .. ',' .. id(ARGV[i + 4]))
    i = i + 5
  elseif op == 'member' then
    local c = id(ARGV[i + 1])
    local key = per_id('@HEADS@', c)
    local first, size, identical = string.match(redis.call('HGET', key, c), '^(%d+),(%d+),(%d)$')
    if ARGV[i + 2] == '0' then identical = '0' end
    size = string.format('%d', tonumber(size) + 1)
    redis.call('HSET', key, c, first .. ',' .. size .. ',' .. identical)
    i = i + 3
  elseif op == 'member_sketch' then
    redis.call('APPEND', prefix .. '@MEMBERS@' .. id(ARGV[i + 1]), ARGV[i + 2])
    i = i + 3
  elseif op == 'representative' then
    redis.call('SET', prefix .. '@SKETCH@' .. id(ARGV[i + 1]), ARGV[i + 2])
    i = i + 3
  elseif op == 'need' then
    redis.call('HSET', prefix .. '@META@', 'need', ARGV[i + 1])
    i = i + 2
  elseif op == 'record' then
    local d = id('D')
    redis.call('HSET', ARGV[i + 1], ARGV[i + 2], d)
    redis.call('HSET', per_id('@DOCUMENTS@', d), d, id(ARGV[i + 4]) .. ':' .. ARGV[i + 3])
    i = i + 5
  else
    return redis.error_reply('unknown op ' .. tostring(op))
  end
end
return {doc, cluster}
"""


def _script(source: str) -> str:
    """A script's source with the key templates filled in (``%d`` dropped: the script appends
    the id itself)."""
    for name, template in KEYS.items():
        source = source.replace(f"@{name.upper()}@", template.replace("%d", ""))
    return source.replace("@PER@", str(_PER_ID_BUCKET))


@dataclass(frozen=True)
class GlobalDecision:
    """One page's decision in the whole crawl, as :meth:`RedisIndex.assign` returns it."""

    #: the global order number: the decision's place in the crawl, and the document's id here
    order: int
    #: the node that decided it
    node: int
    #: the caller's key (the page's URL)
    key: str
    #: ``doc_id`` is :attr:`order`; the cluster ids are the index's
    assignment: Assignment
    #: True when the key's decision was found recorded (made before a restart), not made now
    adopted: bool = False
    #: transactions tried (1 + the retries after another node changed a key this one read)
    attempts: int = 1

    @property
    def decision(self) -> Decision:
        return self.assignment.decision


@dataclass
class _Transaction:
    """What one attempt of :meth:`RedisIndex.assign` has read and means to write."""

    pipe: Any  # a redis-py Pipeline in WATCH mode
    mutable: bool  # the "popular" rule: representatives change, so they are watched
    fingerprints: dict[int, bytes | None] = field(default_factory=dict)
    exact: bytes | None = None
    heads: dict[int, ClusterInfo] = field(default_factory=dict)
    sketches: dict[int, Sketch] = field(default_factory=dict)
    members: dict[int, list[bytes]] = field(default_factory=dict)
    ops: list[bytes] = field(default_factory=list)

    def op(self, name: str, *args: bytes | int | str) -> None:
        self.ops.append(name.encode())
        self.ops.extend(_arg(a) for a in args)


def _arg(value: bytes | int | str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return _ID_TOKENS.get(value) or b"%d" % value


class RedisIndex:
    """The cluster index of a distributed crawl, in the Redis database ``client`` speaks to.

    ``prefix`` names the crawl (every key starts with it); ``node`` is recorded with each
    decision this process makes. ``params`` (any JSON-able mapping: the sketch and dedup
    parameters) and ``bucket_bits`` are fixed by the first process to open the prefix; a
    process that brings others gets a ``ValueError``, since decisions made with other
    parameters would not compare. ``cache_size`` representatives are kept parsed.
    """

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        *,
        node: int = 0,
        params: Mapping[str, Any] | None = None,
        bucket_bits: int = DEFAULT_BUCKET_BITS,
        cache_size: int = 4096,
        reconnect_seconds: float = 30.0,
    ) -> None:
        if client.get_encoder().decode_responses:
            raise ValueError("RedisIndex needs a client with decode_responses=False")
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < 2**16:
            raise ValueError(f"node must be an integer in [0, 65536); got {node!r}")
        if isinstance(bucket_bits, bool) or not isinstance(bucket_bits, int):
            raise ValueError(f"bucket_bits must be an integer; got {bucket_bits!r}")
        if not 4 <= bucket_bits <= 32:
            raise ValueError(f"bucket_bits must be in [4, 32]; got {bucket_bits}")
        self._r = client
        self.prefix = prefix
        self.node = node
        self.bucket_bits = bucket_bits
        self.reconnect_seconds = reconnect_seconds
        self._p = prefix.encode()
        self._cache_size = cache_size
        #: cluster id → (representative, first doc): both fixed under the "first" rule
        self._cache: dict[int, tuple[Sketch, int]] = {}
        self._txn: _Transaction | None = None
        sources = {"read": _READ, "read_cluster": _READ_CLUSTER, "read_need": _READ_NEED,
                   "write": _WRITE}  # fmt: skip
        self._scripts = {name: _script(source) for name, source in sources.items()}
        self._shas: dict[str, str] = {}
        self._load_scripts()
        self._check_meta(params)

    @classmethod
    def from_url(cls, url: str, prefix: str, **kwargs: Any) -> RedisIndex:
        """An index over ``redis://HOST:PORT/DB`` (redis-py's URL forms)."""
        return cls(redis.Redis.from_url(url), prefix, **kwargs)

    def _load_scripts(self) -> None:
        """Load the scripts into Redis (again after a restart, which forgets them)."""
        for name, source in self._scripts.items():
            self._shas[name] = self._r.script_load(source)

    def _call(self, name: str, client: Any, keys: list[bytes], args: list[Any]) -> Any:
        """Run script ``name`` on ``client`` (queued, when it is a pipeline after MULTI)."""
        try:
            return client.evalsha(self._shas[name], len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self._load_scripts()
            return client.evalsha(self._shas[name], len(keys), *keys, *args)

    def _key(self, name: str, number: int | None = None) -> bytes:
        template = KEYS[name]
        return self._p + (template.encode() % number if number is not None else template.encode())

    def _check_meta(self, params: Mapping[str, Any] | None) -> None:
        meta = self._key("meta")
        wanted = {b"bucket_bits": str(self.bucket_bits).encode()}
        if params is not None:
            wanted[b"params"] = json.dumps(params, sort_keys=True, separators=(",", ":")).encode()
        pipe = self._r.pipeline(transaction=True)
        for name, value in wanted.items():
            pipe.hsetnx(meta, name, value)
        pipe.hmget(meta, list(wanted))
        stored = pipe.execute()[-1]
        for (name, value), have in zip(wanted.items(), stored):
            if have != value:
                what = f"{name.decode()} {have.decode()}, not {value.decode()}"
                if name == b"params":
                    what = _differences(json.loads(have), json.loads(value))
                raise ValueError(
                    f"the Redis index {self.prefix!r} was made with {what}: use the same "
                    "parameters on every node, or another crawl name"
                )

    # --- the transaction --------------------------------------------------------------------

    def assign(
        self, clusterer: GreedyClusterer, key: str, sketch: Sketch, content_hash: int
    ) -> GlobalDecision:
        """Decide the page ``key`` and record the decision, in one transaction (module doc).

        ``clusterer`` must run over this index. A key decided before (by this node before a
        restart, or by any node) is not decided again: its recorded decision comes back with
        ``adopted`` True. Retries after ``WATCH`` failures are made here, and so are reconnects
        for up to ``reconnect_seconds`` while Redis restarts, counted from the start of the
        first attempt that failed (the client's own retries in it included).
        """
        if clusterer.index is not self:
            raise ValueError("the clusterer runs over another index")
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        fps = np.asarray(sketch.distinct(), dtype=np.uint64)
        fields = fps.astype(">u8").tobytes()
        buckets = self._buckets(fps)
        posting_keys = [self._key("postings", b) for b in buckets]
        bucket_list = b",".join(b"%d" % b for b in buckets)
        exact_key, exact_field = self._exact_key(content_hash)
        key_bucket = self._key("keys", int(self._buckets_of_bytes(digest)))
        mutable = clusterer.params.representative == "popular"
        down_since: float | None = None
        attempts = 0
        while True:
            attempts += 1
            if attempts > _MAX_ATTEMPTS:
                raise RuntimeError(f"{key}: no transaction committed in {_MAX_ATTEMPTS} tries")
            tried = time.monotonic()
            try:
                with self._r.pipeline(transaction=True) as pipe:
                    pipe.watch(key_bucket, exact_key, *dict.fromkeys(posting_keys))
                    found = self._call(
                        "read", pipe, [key_bucket, exact_key],
                        [self._p, digest, exact_field, fields, bucket_list,
                         b"0" if mutable else b"1"],
                    )  # fmt: skip
                    if found[0] is not None:
                        return self._recorded(int(found[0]), found[1], key, attempts)
                    txn = _Transaction(pipe, mutable, exact=found[1])
                    if found[1] is not None:  # an exact duplicate: no postings were read
                        if found[2] is not None:
                            self._cluster_read(txn, int(found[1].split(b",")[1]), *found[2:4])
                    else:
                        listed = fps.tolist()
                        txn.fingerprints = dict.fromkeys(listed)
                        for position, value in zip(found[4::2], found[5::2]):
                            txn.fingerprints[listed[position - 1]] = value
                    self._txn = txn
                    try:
                        decision = clusterer.decide(sketch, content_hash)
                        assignment = clusterer.write(_PENDING_DOC, sketch, content_hash, decision)
                    finally:
                        self._txn = None
                    txn.op("record", key_bucket, digest, self._pack(decision, assignment, key),
                           assignment.cluster_id)  # fmt: skip
                    pipe.multi()
                    self._call("write", pipe, [], [self._p, *txn.ops])
                    order, new_cluster = pipe.execute()[0]
            except redis.WatchError:
                continue
            except redis.exceptions.NoScriptError:  # Redis restarted between the read and EXEC
                self._load_scripts()
                continue
            except (redis.ConnectionError, redis.TimeoutError):
                # down since the attempt began: a client that retries its commands itself has
                # spent its own retries in it, and they count
                down_since = tried if down_since is None else down_since
                if time.monotonic() - down_since > self.reconnect_seconds:
                    raise
                time.sleep(0.1)
                continue
            clusterer.applied(sketch, decision)
            if assignment.cluster_id == _PENDING_CLUSTER:
                assignment = replace(assignment, cluster_id=int(new_cluster))
                if not mutable:
                    self._remember(int(new_cluster), sketch, int(order))
            assignment = replace(assignment, doc_id=int(order))
            return GlobalDecision(int(order), self.node, key, assignment, False, attempts)

    def _buckets(self, values: np.ndarray) -> list[int]:
        if not values.size:
            return []
        spread = multiply_shift(np.asarray(values, dtype=np.uint64), 1, self.bucket_bits)
        return spread[0].tolist()  # type: ignore[no-any-return]

    def _buckets_of_bytes(self, digest: bytes) -> int:
        return self._buckets(np.array([_FP.unpack_from(digest)[0]], dtype=np.uint64))[0]

    def _exact_key(self, content_hash: int) -> tuple[bytes, bytes]:
        value = int(content_hash)
        bucket = self._buckets(np.array([value], dtype=np.uint64))[0]
        return self._key("exact", bucket), _FP.pack(value)

    # --- the recorded decisions -------------------------------------------------------------

    def _pack(self, decision: Decision, assignment: Assignment, key: str) -> bytes:
        flags = _IDENTICAL if assignment.identical else 0
        flags |= _HAS_RESEMBLANCE if decision.resemblance is not None else 0
        flags |= _HAS_CONTAINMENT if decision.containment is not None else 0
        return _RECORD.pack(
            self.node,
            KINDS.index(decision.kind),
            flags,
            _or_minus(decision.representative_doc),
            _or_minus(decision.duplicate_of),
            math.nan if decision.resemblance is None else decision.resemblance,
            math.nan if decision.containment is None else decision.containment,
            _or_minus(decision.matches),
            _or_minus(decision.sample_size),
            decision.candidates,
            decision.pruned,
            decision.capped,
        ) + key.encode("utf-8")

    def _recorded(self, order: int, value: bytes | None, key: str, attempts: int) -> GlobalDecision:
        if value is None:
            raise RuntimeError(f"{key}: decided at order {order}, but its record is missing")
        return replace(_unpack(order, value), adopted=True, attempts=attempts)

    def decision_of(self, key: str) -> GlobalDecision | None:
        """The decision recorded for ``key``, if any (with ``adopted`` True)."""
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()
        order = self._r.hget(self._key("keys", self._buckets_of_bytes(digest)), digest)
        if order is None:
            return None
        return self._recorded(int(order), self._document_value(int(order)), key, 0)

    def document(self, order: int) -> GlobalDecision | None:
        """The decision made at ``order`` (its key, node, cluster): how a node names a page of
        another node, such as the one its page duplicates."""
        value = self._document_value(order)
        return None if value is None else _unpack(order, value)

    def _document_value(self, order: int) -> bytes | None:
        value = self._r.hget(self._key("documents", order // _PER_ID_BUCKET), b"%d" % order)
        return value  # type: ignore[no-any-return]

    def orders(self) -> int:
        """The last order number taken (by a decision, or by :meth:`take_order`)."""
        return int(self._r.get(self._key("order")) or 0)

    def take_order(self) -> int:
        """The next order number, for a page decided without the index (one skipped: it has
        no sketch), so that every decision of the crawl has its place in one order. Nothing
        is recorded under it: :meth:`document` answers None for it."""
        return int(self._r.incr(self._key("order")))

    # --- reading ----------------------------------------------------------------------------

    def candidates(self, fingerprints: np.ndarray, cap: int) -> Candidates:
        """Clusters whose representative is indexed under any of the (distinct) fingerprints.

        In a transaction the postings come from the read that followed ``WATCH``; any others
        are watched and read now. Each posting's ids are sorted and cut at the ``cap`` lowest.
        """
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError(f"cap must be a positive integer; got {cap!r}")
        fps = np.unique(np.asarray(fingerprints, dtype=np.uint64))
        txn = self._txn
        values: list[bytes | None]
        if txn is None:
            values = self._postings_values(fps, self._r)
        else:
            missing = np.array([fp for fp in fps.tolist() if fp not in txn.fingerprints],
                               dtype=np.uint64)  # fmt: skip
            if missing.size:
                keys = [self._key("postings", b) for b in self._buckets(missing)]
                txn.pipe.watch(*dict.fromkeys(keys))
                found = self._postings_values(missing, self._r)
                txn.fingerprints.update(zip(missing.tolist(), found))
            values = [txn.fingerprints[fp] for fp in fps.tolist()]
        counts: Counter[int] = Counter()
        capped = 0
        for value in values:
            if not value:
                continue
            ids = [int(c) for c in value.split(b",")]
            if len(ids) > cap:
                capped += 1
                ids = sorted(ids)[:cap]
            counts.update(ids)
        return Candidates(shared=dict(counts), capped=capped)

    def _postings_values(self, fps: np.ndarray, client: Any) -> list[bytes | None]:
        if not fps.size:
            return []
        pipe = client.pipeline(transaction=False)
        for bucket, fp in zip(self._buckets(fps), fps.astype(">u8").view("V8").tolist()):
            pipe.hget(self._key("postings", bucket), fp)
        return pipe.execute()  # type: ignore[no-any-return]

    def representative(self, cluster_id: int) -> Sketch:
        txn = self._txn
        if txn is not None and cluster_id in txn.sketches:
            return txn.sketches[cluster_id]
        if txn is None or not txn.mutable:
            cached = self._cache.get(cluster_id)
            if cached is not None:
                return cached[0]
        return self._fetch_cluster(cluster_id)[0]

    def cluster(self, cluster_id: int) -> ClusterInfo:
        txn = self._txn
        if txn is not None and cluster_id in txn.heads:
            return txn.heads[cluster_id]
        return self._fetch_cluster(cluster_id)[1]

    def _fetch_cluster(self, cluster_id: int) -> tuple[Sketch, ClusterInfo]:
        """A cluster's representative and head, read together (watched first when they can
        change under the transaction); remembered for the transaction, the sketch cached."""
        _check_cluster_id(cluster_id)
        keys = [self._key("sketch", cluster_id), self._key("heads", cluster_id // _PER_ID_BUCKET)]
        txn = self._txn
        client: Any = self._r if txn is None else txn.pipe
        if txn is not None and txn.mutable:
            txn.pipe.watch(*keys)
        raw, head = self._call("read_cluster", client, keys, [b"%d" % cluster_id])
        return self._cluster_read(txn, cluster_id, raw, head)

    def _cluster_read(
        self, txn: _Transaction | None, cluster_id: int, raw: bytes | None, head: bytes | None
    ) -> tuple[Sketch, ClusterInfo]:
        """A cluster's representative and head as read: parsed, remembered for the
        transaction, the sketch cached when it cannot change."""
        if raw is None or head is None:
            raise KeyError(f"no cluster {cluster_id}")
        sketch = sketch_from_bytes(raw)
        first, size, identical = (int(v) for v in head.split(b","))
        info = ClusterInfo(cluster_id, first, size, bool(identical))
        if txn is not None:
            txn.heads[cluster_id] = info
            if txn.mutable:
                txn.sketches[cluster_id] = sketch
        if txn is None or not txn.mutable:
            self._remember(cluster_id, sketch, first)
        return sketch, info

    def _remember(self, cluster_id: int, sketch: Sketch, first_doc: int) -> None:
        if len(self._cache) >= self._cache_size:
            self._cache.clear()
        self._cache[cluster_id] = (sketch, first_doc)

    def member_fingerprints(self, cluster_id: int) -> np.ndarray:
        key = self._key("members", cluster_id)
        txn = self._txn
        if txn is not None:
            txn.pipe.watch(key)
            raw = (txn.pipe.get(key) or b"") + b"".join(txn.members.get(cluster_id, []))
        else:
            raw = self._r.get(key) or b""
        return np.frombuffer(raw, dtype=">u8").astype(np.uint64)

    def find_exact(self, content_hash: int) -> tuple[int, int] | None:
        txn = self._txn
        if txn is not None:
            value = txn.exact
        else:
            value = self._r.hget(*self._exact_key(content_hash))
        if value is None:
            return None
        doc, cluster = value.split(b",")
        return int(doc), int(cluster)

    def cluster_of(self, doc_id: int) -> int | None:
        value = self._document_value(doc_id)
        return None if value is None else int(value.split(b":", 1)[0])

    def index_need(self) -> float | None:
        """The need recorded with the first kept page (in the same transaction), read together
        with the cluster count, so that another node's first commit is seen whole or not at all."""
        need, clusters = self._call(
            "read_need", self._r, [self._key("meta"), self._key("clusters")], []
        )
        if need is None:
            return 0.0 if int(clusters or 0) else None
        return float(need)

    # --- writing: collected for the transaction's script -------------------------------------

    def _writing(self) -> _Transaction:
        if self._txn is None:
            raise RuntimeError("a RedisIndex is written only inside RedisIndex.assign(...)")
        return self._txn

    def set_index_need(self, need: float) -> None:
        if not 0.0 <= need <= 1.0:
            raise ValueError(f"index need must be in [0, 1]; got {need!r}")
        self._writing().op("need", repr(float(need)))

    def new_cluster(self, doc_id: int, sketch: Sketch, indexed: np.ndarray | None = None) -> int:
        txn = self._writing()
        txn.op("new", sketch.to_bytes())
        fps = np.unique(sketch.distinct() if indexed is None else np.asarray(indexed, np.uint64))
        self._post(txn, "post", fps, _PENDING_CLUSTER)
        return _PENDING_CLUSTER

    def _post(self, txn: _Transaction, op: str, fps: np.ndarray, cluster_id: int) -> None:
        """Add (``post``) or remove (``unpost``) ``cluster_id`` in the postings of ``fps``."""
        if fps.size:
            buckets = b",".join(b"%d" % b for b in self._buckets(fps))
            txn.op(op, buckets, fps.astype(">u8").tobytes(), cluster_id)

    def add_member(self, cluster_id: int, doc_id: int, identical: bool) -> None:
        self._writing().op("member", cluster_id, b"1" if identical else b"0")

    def set_representative(self, cluster_id: int, sketch: Sketch) -> None:
        """Replace the representative; the postings of the fingerprints that changed follow."""
        txn = self._writing()
        old = self.representative(cluster_id)
        before, after = set(old.distinct().tolist()), set(sketch.distinct().tolist())
        self._post(txn, "unpost", np.array(sorted(before - after), dtype=np.uint64), cluster_id)
        self._post(txn, "post", np.array(sorted(after - before), dtype=np.uint64), cluster_id)
        txn.op("representative", cluster_id, sketch.to_bytes())
        txn.sketches[cluster_id] = sketch

    def record_member_sketch(self, cluster_id: int, sketch: Sketch) -> None:
        txn = self._writing()
        values = np.asarray(sketch.values, dtype=np.uint64).astype(">u8").tobytes()
        txn.op("member_sketch", cluster_id, values)
        txn.members.setdefault(cluster_id, []).append(values)

    def add_exact(self, content_hash: int, doc_id: int, cluster_id: int) -> None:
        """Remember the first document with this content hash; later calls keep the first."""
        txn = self._writing()
        exact_key, exact_field = self._exact_key(content_hash)
        txn.op("exact", exact_key, exact_field, doc_id, cluster_id)

    # --- beyond the protocol: inspection ----------------------------------------------------

    def __len__(self) -> int:
        """The number of clusters."""
        return int(self._r.get(self._key("clusters")) or 0)

    def clusters(self) -> Iterator[ClusterInfo]:
        """Every cluster, in id order."""
        for cluster_id in range(len(self)):
            yield self.cluster(cluster_id)

    def postings(self, fingerprint: int) -> list[int]:
        """The clusters whose representative is indexed under ``fingerprint``, sorted."""
        value = self._postings_values(np.array([fingerprint], dtype=np.uint64), self._r)[0]
        return sorted(int(c) for c in value.split(b",")) if value else []


def _or_minus(value: int | None) -> int:
    return -1 if value is None else int(value)


def _or_none(value: int) -> int | None:
    return None if value < 0 else value


def _unpack(order: int, value: bytes) -> GlobalDecision:
    cluster, packed = value.split(b":", 1)
    (node, kind, flags, representative, duplicate_of, resemblance, containment, matches,
     sample_size, candidates, pruned, capped) = _RECORD.unpack_from(packed)  # fmt: skip
    kind_name = KINDS[kind]
    decision = Decision(
        kind_name,
        cluster_id=None if kind_name == "kept" else int(cluster),
        representative_doc=_or_none(representative),
        duplicate_of=_or_none(duplicate_of),
        resemblance=resemblance if flags & _HAS_RESEMBLANCE else None,
        containment=containment if flags & _HAS_CONTAINMENT else None,
        matches=_or_none(matches),
        sample_size=_or_none(sample_size),
        candidates=candidates,
        pruned=pruned,
        capped=capped,
    )
    assignment = Assignment(
        order, int(cluster), decision, kind_name == "kept", bool(flags & _IDENTICAL)
    )
    key = packed[_RECORD.size :].decode("utf-8")
    return GlobalDecision(order, node, key, assignment)


def _check_cluster_id(cluster_id: int) -> None:
    if isinstance(cluster_id, bool) or not isinstance(cluster_id, (int, np.integer)):
        raise KeyError(f"no cluster {cluster_id!r}")
    if not 0 <= cluster_id < 2**63:
        raise KeyError(f"no cluster {cluster_id}")


def _differences(made: Any, given: Any) -> str:
    """The parameters that differ, as ``name made, not given`` (dotted names), the first three.

    >>> _differences({"dedup": {"threshold": 0.9, "cap": 64}}, {"dedup": {"threshold": 0.8,
    ...              "cap": 64}})
    'dedup.threshold 0.9, not 0.8'
    """

    def flat(value: Any, prefix: str = "") -> dict[str, Any]:
        if not isinstance(value, dict):
            return {prefix: value}
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(flat(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out

    a, b = flat(made), flat(given)
    names = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    said = "; ".join(f"{k} {json.dumps(a.get(k))}, not {json.dumps(b.get(k))}" for k in names[:3])
    return said + (f" (and {len(names) - 3} more)" if len(names) > 3 else "")
