#!/usr/bin/env python3
"""gen_defects.py - write one malformed checkpoint per kind of defect.

    python3 tests/defects/gen_defects.py [OUTDIR]    (default: tests/defects/files)

Writes each file into OUTDIR and the verdict every file must get into
tests/defects/manifest.tsv (next to this script):

    file <TAB> ok|error <TAB> substring of the expected error message

`ok` means the file must open, every tensor must read and the root must
write as JSON; `error` means the first failure of those steps must carry the
substring.  tests/defects/test_defects.c checks every line.

Python 3 standard library only (no torch).  The files are built from first
principles (torch's ZIP layout, the legacy stream, the TAR members) so that
each one holds exactly one defect; a few start from tests/fixtures.  The
output is deterministic: running the script twice gives the same bytes.
"""
import io
import os
import struct
import sys
import tarfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, '..', 'fixtures')

# ---------------------------------------------------------------------------
# a small pickle writer (protocol 2 opcodes)
# ---------------------------------------------------------------------------

PROTO2 = b'\x80\x02'
MARK, STOP, TUPLE, LIST, DICT = b'(', b'.', b't', b'l', b'd'
EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE = b'}', b']', b')'
SETITEM, SETITEMS, APPEND, APPENDS, BUILD = b's', b'u', b'a', b'e', b'b'
REDUCE, BINPERSID, NONE, NEWFALSE, NEWTRUE = b'R', b'Q', b'N', b'\x89', b'\x88'
DUP, POP = b'2', b'0'


def u(s):
    """BINUNICODE"""
    b = s.encode('utf-8')
    return b'X' + struct.pack('<I', len(b)) + b


def i(n):
    """The smallest int opcode for n."""
    if 0 <= n < 256:
        return b'K' + bytes([n])
    if 0 <= n < 65536:
        return b'M' + struct.pack('<H', n)
    if -2**31 <= n < 2**31:
        return b'J' + struct.pack('<i', n)
    nb = (n.bit_length() + 8) // 8
    return b'\x8a' + bytes([nb]) + n.to_bytes(nb, 'little', signed=True)


def glob(mod, name):
    return b'c' + mod.encode() + b'\n' + name.encode() + b'\n'


def tup(*items):
    return MARK + b''.join(items) + TUPLE


def put(k):
    return b'q' + bytes([k])


def get(k):
    return b'h' + bytes([k])


def pid(cls='FloatStorage', key='0', numel=15, legacy=False, view=None, mod='torch'):
    parts = [u('storage'), glob(mod, cls), u(key), u('cpu'), i(numel)]
    if legacy:
        parts.append(NONE if view is None else tup(u(view[0]), i(view[1]), i(view[2])))
    return tup(*parts) + BINPERSID


def tensor(cls='FloatStorage', key='0', numel=15, offset=0, size=(5, 3), stride=(3, 1),
           legacy=False, view=None, rebuild='_rebuild_tensor_v2', raw_offset=None, raw_pid=None,
           extra=b'', raw_shape=None):
    body = (raw_pid if raw_pid is not None else pid(cls, key, numel, legacy, view))
    body += raw_offset if raw_offset is not None else i(offset)
    body += raw_shape if raw_shape is not None else tup(*[i(x) for x in size]) + tup(*[i(x) for x in stride])
    if rebuild != '_rebuild_tensor':
        body += NEWFALSE + glob('collections', 'OrderedDict') + EMPTY_TUPLE + REDUCE
    body += extra
    return glob('torch._utils', rebuild) + MARK + body + TUPLE + REDUCE


def state_dict(*items):
    """{name: value_bytes, ...} in order, as torch pickles a plain dict."""
    out = PROTO2 + EMPTY_DICT + MARK
    for k, v in items:
        out += u(k) + v
    return out + SETITEMS + STOP


def one_tensor(**kw):
    return state_dict(('w', tensor(**kw)))


FLOATS15 = struct.pack('<15f', *[float(k) for k in range(15)])

# ---------------------------------------------------------------------------
# ZIP, laid out as torch.save writes it
# ---------------------------------------------------------------------------


def raw_deflate(data, level=9):
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


class Rec:
    def __init__(self, name, data, method=0, size=None, csize=None, stored=None):
        self.name = name.encode() if isinstance(name, str) else name
        self.data = data
        self.method = method
        self.stored = stored if stored is not None else (raw_deflate(data) if method == 8 else data)
        self.size = len(data) if size is None else size
        self.csize = len(self.stored) if csize is None else csize
        self.crc = zlib.crc32(data) & 0xffffffff


def build_zip(recs, zip64=False, eocd64=True, root='archive'):
    """Returns (bytes, layout) where layout names every header's offset."""
    out = bytearray()
    lay = {'local': [], 'cd': []}
    for r in recs:
        name = (root + '/').encode() + r.name if root is not None else r.name
        r.full = name
        r.off = len(out)
        lay['local'].append(r.off)
        hdr = 30 + len(name) + 4
        pad = (64 - (len(out) + hdr) % 64) % 64
        out += struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0x08, r.method, 0, 0x21, 0, 0, 0,
                           len(name), 4 + pad)
        out += name + struct.pack('<HH', 0x4246, pad) + b'Z' * pad
        out += r.stored
        out += struct.pack('<IIII', 0x08074b50, r.crc, r.csize & 0xffffffff, r.size & 0xffffffff)
    cd = len(out)
    lay['cd_off'] = cd
    for r in recs:
        lay['cd'].append(len(out))
        big = zip64 or r.size >= 0xffffffff or r.csize >= 0xffffffff or r.off >= 0xffffffff
        extra = struct.pack('<HHQQQ', 1, 24, r.size, r.csize, r.off) if big else b''
        m = 0xffffffff
        out += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 0x031e, 45 if big else 20, 0x08,
                           r.method, 0, 0x21, r.crc, m if big else r.csize, m if big else r.size,
                           len(r.full), len(extra), 0, 0, 0, 0, m if big else r.off)
        out += r.full + extra
    cd_size = len(out) - cd
    lay['cd_size'] = cd_size
    if eocd64:
        lay['eocd64'] = len(out)
        out += struct.pack('<IQHHIIQQQQ', 0x06064b50, 44, 0x031e, 45, 0, 0, len(recs), len(recs),
                           cd_size, cd)
        lay['locator'] = len(out)
        out += struct.pack('<IIQI', 0x07064b50, 0, lay['eocd64'], 1)
    lay['eocd'] = len(out)
    n = 0xffff if zip64 else len(recs)
    out += struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, n, n, 0xffffffff if zip64 else cd_size,
                       0xffffffff if zip64 else cd, 0)
    return bytes(out), lay


def torch_zip(pkl, storages=(('0', FLOATS15),), extra=(), method=0, **kw):
    recs = [Rec('data.pkl', pkl, method)]
    recs += [Rec('data/' + k, d, method) for k, d in storages]
    recs += [Rec('version', b'3\n')] + list(extra)
    return build_zip(recs, **kw)


def patch(data, off, fmt, *vals):
    b = bytearray(data)
    struct.pack_into(fmt, b, off, *vals)
    return bytes(b)


# ---------------------------------------------------------------------------
# legacy stream
# ---------------------------------------------------------------------------

LEGACY_MAGIC = b'\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.'
LEGACY_PROTO = b'\x80\x02M\xe9\x03.'
SYS_INFO = (PROTO2 + EMPTY_DICT + MARK + u('protocol_version') + i(1001) + u('little_endian') +
            NEWTRUE + u('type_sizes') + EMPTY_DICT + MARK + u('short') + i(2) + u('int') + i(4) +
            u('long') + i(4) + SETITEMS + SETITEMS + STOP)


def legacy(obj, keys=('0',), data=((15, FLOATS15),), magic=LEGACY_MAGIC, proto=LEGACY_PROTO,
           sys_info=SYS_INFO, keys_pickle=None):
    out = magic + proto + sys_info + obj
    out += keys_pickle if keys_pickle is not None else (
        PROTO2 + EMPTY_LIST + MARK + b''.join(u(k) for k in keys) + APPENDS + STOP)
    for count, raw in data:
        out += struct.pack('<q', count) + raw
    return out


def legacy_tensor(**kw):
    kw.setdefault('legacy', True)
    return state_dict(('w', tensor(**kw)))


# ---------------------------------------------------------------------------
# TAR (torch.save before 0.1.10)
# ---------------------------------------------------------------------------


def tar_members():
    with tarfile.open(os.path.join(FIXTURES, 'views_tar.pt')) as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def build_tar(members):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode='w', format=tarfile.USTAR_FORMAT) as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            ti.mode = 0o644
            t.addfile(ti, io.BytesIO(data))
    return bio.getvalue()


def tar_checksum(b, off):
    h = bytearray(b[off:off + 512])
    h[148:156] = b' ' * 8
    s = sum(h)
    h[148:156] = b'%06o\x00 ' % s
    return b[:off] + bytes(h) + b[off + 512:]


def tar_set(b, off, field_off, raw):
    b = b[:off + field_off] + raw + b[off + field_off + len(raw):]
    return tar_checksum(b, off)


def tar_header_offsets(b):
    offs, off = [], 0
    while off + 512 <= len(b) and any(b[off:off + 512]):
        offs.append(off)
        size = int(b[off + 124:off + 136].strip(b'\x00 ') or b'0', 8)
        off += 512 + (size + 511) // 512 * 512
    return offs


def tar_with(**replace):
    ms = [(n, replace.get(n, d)) for n, d in tar_members()]
    return build_tar([(n, d) for n, d in ms if d is not None])


def storages_member(entries, views=()):
    """entries: [(key, cls, count, raw)]"""
    out = PROTO2 + i(len(entries)) + STOP
    for key, cls, count, raw in entries:
        out += PROTO2 + tup(i(key), u('cpu'), glob('torch', cls)) + STOP
        out += struct.pack('<q', count) + raw
    out += PROTO2 + EMPTY_LIST
    if views:
        out += MARK + b''.join(tup(*[i(x) for x in v]) for v in views) + APPENDS
    return out + STOP


def tensors_member(entries):
    """entries: [(key, storage_key, ndim_field, sizes, strides, offset)]"""
    out = PROTO2 + i(len(entries)) + STOP
    for key, sk, nd, sizes, strides, off in entries:
        out += PROTO2 + tup(i(key), i(sk), glob('torch', 'FloatTensor')) + STOP
        out += struct.pack('<ii', nd, 0)
        out += b''.join(struct.pack('<q', x) for x in sizes)
        out += b''.join(struct.pack('<q', x) for x in strides)
        out += struct.pack('<q', off)
    return out


def tar_simple(tensors=None, storages=None, pickle=None):
    """One float storage '1' of 15 elements, tensor '7' of 5x3 named 'w'."""
    st = storages if storages is not None else storages_member([(1, 'FloatStorage', 15, FLOATS15)])
    te = tensors if tensors is not None else tensors_member([(7, 1, 2, (5, 3), (3, 1), 0)])
    pk = pickle if pickle is not None else (PROTO2 + EMPTY_DICT + MARK + u('w') + b'P7\n' +
                                            SETITEMS + STOP)
    si = dict(tar_members())['sys_info']
    return build_tar([('sys_info', si), ('storages', st), ('tensors', te), ('pickle', pk)])


# ---------------------------------------------------------------------------
# the defects
# ---------------------------------------------------------------------------

DEFECTS = []  # (file name, bytes, verdict, substring)


def defect(name, data, verdict, substring=''):
    DEFECTS.append((name, data, verdict, substring))


def zip_defects():
    good, lay = torch_zip(one_tensor())
    defect('zip_good.pt', good, 'ok')
    plain, play = torch_zip(one_tensor(), eocd64=False)
    defect('zip_good_no_zip64.pt', plain, 'ok')
    z64, zlay = torch_zip(one_tensor(), zip64=True)
    defect('zip_good_zip64_fields.pt', z64, 'ok')

    # the end of central directory record
    defect('zip_eocd_truncated.pt', good[:-10], 'error', 'end of central directory record not found')
    defect('zip_eocd_missing.pt', good[:lay['eocd']], 'error',
           'end of central directory record not found')
    defect('zip_eocd_comment_length_lie.pt', patch(good, lay['eocd'] + 20, '<H', 500), 'error',
           'end of central directory record not found')
    defect('zip_eocd_multidisk.pt', patch(good, lay['eocd'] + 4, '<H', 1), 'error', 'multi-disk')
    defect('zip_eocd_cd_offset_lie.pt', patch(plain, play['eocd'] + 16, '<I', 0x7fffff00), 'error',
           'lies outside the archive')
    defect('zip_eocd_cd_size_lie.pt', patch(plain, play['eocd'] + 12, '<I', 0xfffffff0), 'error',
           'lies outside the archive')
    defect('zip_eocd_cd_size_short.pt', patch(plain, play['eocd'] + 12, '<I', play['cd_size'] - 10),
           'error', 'central directory entry 2 runs past the directory')
    b = patch(plain, play['eocd'] + 8, '<H', 0xfff0)
    defect('zip_eocd_entry_count_lie.pt', patch(b, play['eocd'] + 10, '<H', 0xfff0), 'error', 'cannot hold')
    b = patch(plain, play['eocd'] + 8, '<H', 0)
    defect('zip_eocd_no_entries.pt', patch(b, play['eocd'] + 10, '<H', 0), 'error', 'ZIP archive is empty')
    defect('zip_eocd_disagrees_with_zip64.pt', patch(good, lay['eocd'] + 16, '<I', 0), 'error',
           'disagrees with the end record')

    # ZIP64 end record and locator
    defect('zip64_locator_offset_lie.pt', patch(good, lay['locator'] + 8, '<Q', 1 << 62), 'error',
           'ZIP64 locator points outside the archive')
    defect('zip64_locator_offset_negative.pt', patch(good, lay['locator'] + 8, '<Q', 2**64 - 8), 'error',
           'ZIP64 locator points outside the archive')
    defect('zip64_eocd_bad_signature.pt', patch(good, lay['eocd64'], '<I', 0x06064b51), 'error',
           'bad ZIP64 end record signature')
    defect('zip64_eocd_missing.pt', patch(z64, zlay['locator'], '<I', 0), 'error', 'ZIP64 end record missing')
    defect('zip64_eocd_cd_offset_huge.pt', patch(z64, zlay['eocd64'] + 48, '<Q', 1 << 63), 'error',
           'lies outside the archive')
    defect('zip64_eocd_cd_size_huge.pt', patch(z64, zlay['eocd64'] + 40, '<Q', 2**64 - 1), 'error',
           'lies outside the archive')
    b = patch(z64, zlay['eocd64'] + 24, '<Q', 1 << 40)
    defect('zip64_eocd_entry_count_huge.pt', patch(b, zlay['eocd64'] + 32, '<Q', 1 << 40), 'error',
           'records (limit')
    b = patch(z64, zlay['eocd64'] + 24, '<Q', 1000)
    defect('zip64_eocd_entry_count_lie.pt', patch(b, zlay['eocd64'] + 32, '<Q', 1000), 'error', 'cannot hold')

    # central directory entries
    cd0, cd1 = lay['cd'][0], lay['cd'][1]
    defect('zip_cd_bad_signature.pt', patch(good, cd1, '<I', 0x02014b51), 'error', 'bad central directory entry 1')
    defect('zip_cd_name_length_lie.pt', patch(good, cd1 + 28, '<H', 0xffff), 'error', 'runs past the directory')
    defect('zip_cd_extra_length_lie.pt', patch(good, cd0 + 30, '<H', 0x8000), 'error', 'runs past the directory')
    defect('zip_cd_comment_length_lie.pt', patch(good, cd0 + 32, '<H', 0x8000), 'error',
           'runs past the directory')
    defect('zip_cd_local_offset_lie.pt', patch(good, cd1 + 42, '<I', 0x7ffffff0), 'error',
           'lies outside the archive')
    defect('zip_cd_local_offset_into_cd.pt', patch(good, cd1 + 42, '<I', lay['cd_off'] - 10), 'error',
           'lies outside the archive')
    b = patch(good, cd1 + 20, '<I', 0x7ffffff0)
    defect('zip_cd_sizes_lie.pt', patch(b, cd1 + 24, '<I', 0x7ffffff0), 'error', 'runs into the central directory')
    defect('zip_cd_stored_sizes_differ.pt', patch(good, cd1 + 20, '<I', 4), 'error', 'has compressed size 4')
    defect('zip_cd_size_too_small_for_storage.pt',
           patch(patch(good, cd1 + 20, '<I', 8), cd1 + 24, '<I', 8), 'error', 'but its storage needs 60')
    defect('zip_cd_zip64_extra_too_short.pt', patch(z64, zlay['cd'][1] + 30, '<H', 12), 'error',
           'bad central directory entry 2')
    b = patch(z64, zlay['cd'][1] + 46 + len(b'archive/data/0') + 2, '<H', 8)
    defect('zip_cd_zip64_extra_truncated.pt', b, 'error', 'too short')
    defect('zip_cd_zip64_offset_huge.pt', patch(z64, zlay['cd'][1] + 46 + len(b'archive/data/0') + 20, '<Q',
                                                1 << 63), 'error', 'lies outside the archive')
    defect('zip_cd_zip64_size_huge.pt',
           patch(patch(z64, zlay['cd'][1] + 46 + len(b'archive/data/0') + 4, '<Q', 1 << 63),
                 zlay['cd'][1] + 46 + len(b'archive/data/0') + 12, '<Q', 1 << 63),
           'error', 'runs into the central directory')
    defect('zip_cd_unknown_method.pt', patch(good, cd1 + 10, '<H', 12), 'error', 'compression method 12')
    defect('zip_cd_encrypted.pt', patch(good, cd1 + 8, '<H', 0x09), 'error', 'is encrypted')

    # local headers
    l1 = lay['local'][1]
    defect('zip_local_bad_signature.pt', patch(good, l1, '<I', 0x04034b51), 'error', 'bad local header signature')
    defect('zip_local_name_length_lie.pt', patch(good, l1 + 26, '<H', 0xffff), 'error',
           'runs into the central directory')
    defect('zip_local_extra_length_lie.pt', patch(good, l1 + 28, '<H', 0xfff0), 'error',
           'runs into the central directory')

    # truncation
    defect('zip_truncated_in_cd.pt', good[:lay['cd'][1] + 10], 'error', 'not found')
    defect('zip_truncated_in_data.pt', good[:lay['local'][1] + 40], 'error', 'not found')
    defect('zip_only_local_header.pt', good[:30], 'error', 'not found')

    # records
    d, _ = build_zip([Rec('archive/data.pkl', one_tensor()), Rec('archive/data.pkl', one_tensor()),
                      Rec('archive/data/0', FLOATS15)], root=None)
    defect('zip_duplicate_record.pt', d, 'error', 'appears twice')
    d, _ = build_zip([Rec('data.pkl', one_tensor()), Rec('data/0', FLOATS15)], root=None)
    defect('zip_no_root_folder.pt', d, 'error', 'not inside a root folder')
    d, _ = build_zip([Rec('data.bin', one_tensor()), Rec('data/0', FLOATS15)])
    defect('zip_no_data_pkl.pt', d, 'error', 'has no archive/data.pkl')
    d, _ = torch_zip(one_tensor(), storages=())
    defect('zip_missing_storage.pt', d, 'error', "'archive/data/0' is missing")
    d, _ = torch_zip(one_tensor(), storages=(('0', FLOATS15[:40]),))
    defect('zip_storage_record_short.pt', d, 'error', 'holds 40 bytes but its storage needs 60')
    d, _ = torch_zip(one_tensor(), extra=[Rec('byteorder', b'middle')])
    defect('zip_byteorder_bad.pt', d, 'error', "byteorder record says 'middle'")
    d, _ = torch_zip(one_tensor(), extra=[Rec('byteorder', b'big')])
    defect('zip_byteorder_big.pt', d, 'ok')
    d, _ = build_zip([Rec('data.pkl', one_tensor()), Rec('data/0', FLOATS15), Rec('version', b'3' * 200)])
    defect('zip_version_too_long.pt', d, 'error', "record 'archive/version' is too long")

    # deflate
    d, _ = torch_zip(one_tensor(), method=8)
    defect('zip_deflated_good.pt', d, 'ok')
    d, _ = build_zip([Rec('data.pkl', one_tensor(), 8, stored=b'\xff' * 64), Rec('data/0', FLOATS15)])
    defect('zip_deflate_corrupt.pt', d, 'error', 'is corrupt')
    pk = one_tensor()
    d, _ = build_zip([Rec('data.pkl', pk, 8, stored=raw_deflate(pk)[:-6]), Rec('data/0', FLOATS15)])
    defect('zip_deflate_truncated.pt', d, 'error', 'ends early')
    d, _ = build_zip([Rec('data.pkl', pk, 8, size=len(pk) + 100), Rec('data/0', FLOATS15)])
    defect('zip_deflate_shorter_than_declared.pt', d, 'error', 'shorter than declared')
    # zip bombs: 64 MiB of zeros after a valid pickle, declared as the pickle only
    bomb = pk + bytes(64 << 20)
    d, _ = build_zip([Rec('data.pkl', pk, 8, stored=raw_deflate(bomb)), Rec('data/0', FLOATS15)])
    defect('zip_bomb_pickle_small_declared.pt', d, 'ok')
    d, _ = build_zip([Rec('data.pkl', pk), Rec('data/0', FLOATS15, 8,
                                                stored=raw_deflate(FLOATS15 + bytes(64 << 20)))])
    defect('zip_bomb_storage_small_declared.pt', d, 'ok')
    d, _ = build_zip([Rec('data.pkl', pk, 8, size=100 << 30), Rec('data/0', FLOATS15)])
    defect('zip_bomb_pickle_declared_100g.pt', d, 'error', 'declares 107374182400 bytes, more than its')
    d, _ = build_zip([Rec('data.pkl', pk, 8, size=64 << 20), Rec('data/0', FLOATS15)])
    defect('zip_pickle_declared_64m_deflated.pt', d, 'error', 'declares 67108864 bytes, more than its')
    big = one_tensor() + bytes(101 << 20)
    d, _ = build_zip([Rec('data.pkl', big, 8), Rec('data/0', FLOATS15)])
    defect('zip_pickle_over_size_limit.pt', d, 'error', 'data.pkl is %d bytes (limit' % len(big))
    # a memory bomb: 64 MiB of empty lists (about 4 GB of values) deflated
    # to a few KiB; an inflated pickle earns no memory beyond max_memory
    unit = b'(' + b']' * 1000 + b'e'
    lists = PROTO2 + b']' + unit * ((64 << 20) // len(unit)) + STOP
    d, _ = build_zip([Rec('data.pkl', lists, 8), Rec('data/0', FLOATS15)])
    defect('zip_pickle_memory_bomb.pt', d, 'error', 'memory limit of 240 MiB')
    d, _ = build_zip([Rec('data.pkl', one_tensor(numel=25 << 30, size=(5, 3))),
                      Rec('data/0', FLOATS15, 8, size=100 << 30)])
    defect('zip_bomb_storage_declared_100g.pt', d, 'error', 'declares 107374182400 bytes, more than its')
    # a strided view over a deflated storage that lies about its size: no 4 GB buffer
    d, _ = build_zip([Rec('data.pkl', one_tensor(numel=1 << 30, size=(2, 2), stride=(1 << 29, 1))),
                      Rec('data/0', FLOATS15, 8, size=4 << 30)])
    defect('zip_strided_view_over_lying_deflated_storage.pt', d, 'error', 'declares 4294967296 bytes, more than its')


def pickle_defects():
    P = PROTO2
    defect('pkl_bad_opcode.pkl', P + b'\xff' + STOP, 'error', 'unknown pickle opcode 0xff')
    defect('pkl_no_stop.pkl', P + NONE, 'error', 'pickle ends without STOP')
    defect('pkl_truncated_binunicode.pkl', P + b'X\x10\x00\x00\x00abc', 'error', 'truncated pickle')
    defect('pkl_truncated_text_line.pkl', P + b'I12345', 'error', 'unterminated')
    defect('pkl_stop_on_empty_stack.pkl', P + STOP, 'error', 'stack underflow')
    defect('pkl_stack_underflow_reduce.pkl', P + NONE + REDUCE + STOP, 'error', 'stack underflow')
    defect('pkl_stack_underflow_past_mark.pkl', P + NONE + MARK + APPEND + STOP, 'error', 'stack underflow')
    defect('pkl_mark_missing.pkl', P + NONE + TUPLE + STOP, 'error', 'MARK expected but missing')
    defect('pkl_memo_get_undefined.pkl', P + get(5) + STOP, 'error', 'memo key 5 is not defined')
    defect('pkl_memo_long_get_huge.pkl', P + b'j\xff\xff\xff\xff' + STOP, 'error', 'memo key 4294967295 is not defined')
    defect('pkl_memo_text_get_huge.pkl', P + b'g99999999999999999999999\n.', 'error', 'bad GET key')
    defect('pkl_memo_put_empty_stack.pkl', P + put(0) + STOP, 'error', 'stack underflow')
    defect('pkl_setitem_on_list.pkl', P + EMPTY_LIST + NONE + NONE + SETITEM + STOP, 'error', 'SETITEM on a list')
    defect('pkl_setitem_on_int.pkl', P + i(1) + NONE + NONE + SETITEM + STOP, 'error', 'SETITEM on a int')
    defect('pkl_setitems_on_tuple.pkl', P + EMPTY_TUPLE + MARK + NONE + NONE + SETITEMS + STOP, 'error',
           'SETITEM on a tuple')
    defect('pkl_append_on_dict.pkl', P + EMPTY_DICT + NONE + APPEND + STOP, 'error', 'APPEND to a dict')
    defect('pkl_appends_on_str.pkl', P + u('s') + MARK + NONE + APPENDS + STOP, 'error', 'APPEND to a str')
    defect('pkl_build_on_int.pkl', P + i(7) + EMPTY_DICT + BUILD + STOP, 'error', 'BUILD on a int')
    defect('pkl_build_on_none.pkl', P + NONE + EMPTY_DICT + BUILD + STOP, 'error', 'BUILD on a none')
    defect('pkl_additems_on_list.pkl', P + EMPTY_LIST + MARK + NONE + b'\x90' + STOP, 'error', 'ADDITEMS to a list')
    defect('pkl_dict_odd_items.pkl', P + MARK + NONE + DICT + STOP, 'error', 'odd number of items')
    defect('pkl_long4_huge.pkl', P + b'\x8b\xff\xff\xff\x7f' + b'\x01' * 8 + STOP, 'error', 'truncated pickle')
    defect('pkl_long4_negative.pkl', P + b'\x8b\xff\xff\xff\xff' + STOP, 'error', 'negative length')
    defect('pkl_long1_past_end.pkl', P + b'\x8a\xff\x01\x02', 'error', 'truncated pickle')
    defect('pkl_binunicode8_huge.pkl', b'\x80\x04\x8d' + struct.pack('<Q', 1 << 62) + b'ab' + STOP, 'error',
           'exceeds the pickle size limit')
    defect('pkl_binunicode8_past_end.pkl', b'\x80\x04\x8d' + struct.pack('<Q', 1000) + b'ab' + STOP, 'error',
           'truncated pickle')
    defect('pkl_binbytes8_max.pkl', b'\x80\x04\x8e' + b'\xff' * 8 + STOP, 'error', 'exceeds the pickle size limit')
    defect('pkl_bytearray8_past_end.pkl', b'\x80\x05\x96' + struct.pack('<Q', 17) + STOP, 'error', 'truncated pickle')
    defect('pkl_binstring_negative.pkl', P + b'T\xff\xff\xff\xff' + STOP, 'error', 'negative length')
    defect('pkl_protocol_6.pkl', b'\x80\x06' + NONE + STOP, 'error', 'unsupported pickle protocol 6')
    defect('pkl_extension_registry.pkl', P + b'\x82\x01' + STOP, 'error', 'extension registry')
    defect('pkl_out_of_band_buffer.pkl', b'\x80\x05\x97' + STOP, 'error', 'out-of-band buffer')
    defect('pkl_persistent_id_in_plain.pkl', P + u('x') + BINPERSID + STOP, 'error', 'cannot have one')
    defect('pkl_stack_global_not_str.pkl', b'\x80\x04' + i(1) + i(2) + b'\x93' + STOP, 'error', 'two strings')
    defect('pkl_bad_float_text.pkl', b'Fnotafloat\n.', 'error', 'bad FLOAT text')
    defect('pkl_bad_int_text.pkl', b'I12x\n.', 'error', 'bad integer text')
    defect('pkl_string_unquoted.pkl', b"Sabc\n.", 'error', 'not quoted')

    # billion laughs: 2**80 paths through 80 levels of shared lists
    b = P + EMPTY_LIST
    for _ in range(80):
        b += DUP + b'\x86'  # TUPLE2 of the same object twice
    defect('pkl_billion_laughs_dup.pkl', b + STOP, 'ok')  # walked once: no tensor below
    b = P + EMPTY_LIST + put(0) + POP
    for k in range(1, 80):
        b += MARK + get(k - 1) + get(k - 1) + get(k - 1) + LIST + put(k) + POP
    defect('pkl_billion_laughs_memo.pkl', b + get(79) + STOP, 'ok')
    # sharing that the walk cannot cut short: each shared list also holds the
    # root, so every walk of it meets a cycle through a value above it
    b = P + EMPTY_LIST + put(0) + MARK + get(0) + LIST + put(1) + POP
    for k in range(2, 42):
        b += MARK + get(0) + get(k - 1) + get(k - 1) + LIST + put(k) + POP
    defect('pkl_cycles_through_root_laughs.pkl', b + get(41) + APPEND + STOP, 'error',
           'shared references expand too much')
    # the same sharing with a tensor at the bottom: 2**22 names
    # (tensor_laughs_4m_names.pt).  Copies out of shared values:
    pair = tup(u('k'), NONE) + put(1) + POP
    big = pair + MARK + get(1) * 4000 + LIST + put(2) + POP
    for name, g in (('ordereddict', glob('collections', 'OrderedDict')), ('list', glob('builtins', 'list')),
                    ('set', glob('__builtin__', 'set'))):
        defect('pkl_copy_laughs_%s.pkl' % name, P + big + g + put(3) + POP + MARK +
               (get(3) + get(2) + b'\x85' + REDUCE) * 6000 + LIST + STOP, 'error', 'copy more than')
    s = u('x' * 65536) + put(1) + POP + u('latin1') + put(2) + POP + glob('_codecs', 'encode') + put(3) + POP
    defect('pkl_copy_laughs_codecs.pkl', P + s + MARK + (get(3) + get(1) + get(2) + b'\x86' + REDUCE) * 3000 +
           LIST + STOP, 'error', 'copy more than')
    g = glob('copyreg', '__newobj__') + put(0) + POP
    defect('pkl_newobj_of_newobj_chain.pkl', P + g + get(0) + MARK + get(0) * 10000 + TUPLE + REDUCE + STOP, 'ok')
    # a 64 KiB string referenced 2000 times: cheap to walk, 128 MB as JSON text
    s = u('x' * (64 << 10)) + put(0)
    defect('pkl_shared_string_laughs.pkl', P + EMPTY_LIST + s + POP + MARK + get(0) * 2000 + APPENDS + STOP,
           'error', 'JSON output')
    # a $ref path of 1000 keys of 64 KiB each, written 1000 times: 64 GB of JSON
    b = P + u('k' * (64 << 10)) + put(0) + POP + EMPTY_LIST + put(1) + POP + EMPTY_LIST + get(1)
    b += (EMPTY_DICT + get(0)) * 998 + get(1) + SETITEM * 998 + APPEND
    defect('pkl_json_ref_path_laughs.pkl', b + MARK + get(1) * 1000 + APPENDS + STOP, 'error', 'JSON output')
    # deep nesting: 100000 lists, each inside the previous one; and tuples
    defect('pkl_deep_lists_100k.pkl', P + EMPTY_LIST * 100000 + APPEND * 99999 + STOP, 'error', 'nest deeper')
    defect('pkl_deep_marks_20k.pkl', P + MARK * 20000 + LIST * 20000 + STOP, 'error', 'nest deeper')
    defect('pkl_deep_tuple1_20k.pkl', P + NONE + b'\x85' * 20000 + STOP, 'error', 'nest deeper')
    defect('pkl_deep_dicts_20k.pkl', P + u('k') + put(0) + POP + (EMPTY_DICT + get(0)) * 20000 + NONE +
           SETITEM * 20000 + STOP,
           'error', 'nest deeper')
    # cycles and shared references are fine
    defect('pkl_cycle_list_contains_itself.pkl', P + EMPTY_LIST + put(0) + get(0) + APPEND + STOP, 'ok')
    defect('pkl_cycle_dict_contains_itself.pkl', P + EMPTY_DICT + put(0) + u('me') + get(0) + SETITEM + STOP, 'ok')
    defect('pkl_cycle_object_state_itself.pkl',
           P + glob('argparse', 'Namespace') + EMPTY_TUPLE + b'\x81' + put(0) + get(0) + BUILD + STOP, 'ok')
    defect('pkl_cycle_mutual.pkl', P + EMPTY_LIST + put(0) + EMPTY_LIST + put(1) + get(0) + APPEND +
           APPEND + STOP, 'ok')
    defect('pkl_shared_dag_small.pkl', P + EMPTY_LIST + put(0) + POP + MARK + get(0) * 1000 + LIST + STOP, 'ok')
    # nothing is executed: dangerous globals are inert names
    defect('pkl_os_system.pkl', P + glob('os', 'system') + tup(u('touch /tmp/ckpt_pwned')) + REDUCE + STOP, 'ok')
    defect('pkl_builtins_eval_stack_global.pkl',
           b'\x80\x04' + b'\x8c\x08builtins\x8c\x04eval\x93' + tup(u('1+1')) + REDUCE + STOP, 'ok')
    defect('pkl_subprocess_inst.pkl', b'(S"ls"\nisubprocess\ncheck_output\n.', 'ok')


def tensor_defects():
    def z(pk, st=(('0', FLOATS15),)):
        return torch_zip(pk, storages=st)[0]
    defect('tensor_good.pt', z(one_tensor()), 'ok')
    defect('tensor_shape_overflow.pt', z(one_tensor(size=(1 << 62, 1 << 62), stride=(1, 1))), 'error',
           'element count overflows')
    defect('tensor_nbytes_overflow.pt', z(one_tensor(size=(1 << 62,), stride=(1,))), 'error',
           'exceeds the tensor size limit')
    defect('tensor_stride_overflow.pt', z(one_tensor(size=(2, 2), stride=(1 << 62, 1))), 'error',
           'extent overflows')
    defect('tensor_stride_huge.pt', z(one_tensor(size=(2, 2), stride=(1 << 40, 1))), 'error', 'reaches byte')
    defect('tensor_view_past_storage.pt', z(one_tensor(offset=10)), 'error', 'reaches byte 100 of storage')
    defect('tensor_offset_huge.pt', z(one_tensor(offset=(1 << 63) - 1)), 'error', 'overflows')
    defect('tensor_negative_offset.pt', z(one_tensor(offset=-1)), 'error', 'storage offset is not a non-negative')
    defect('tensor_negative_size.pt', z(one_tensor(size=(-5, 3))), 'error', 'negative entry')
    defect('tensor_negative_stride.pt', z(one_tensor(stride=(-3, 1))), 'error', 'negative entry')
    defect('tensor_rank_65.pt', z(one_tensor(size=(1,) * 65, stride=(1,) * 65)), 'error', '65 dimensions')
    defect('tensor_rank_64.pt', z(one_tensor(size=(1,) * 64, stride=(1,) * 64)), 'ok')
    defect('tensor_size_stride_rank_differ.pt', z(one_tensor(size=(5, 3), stride=(1,))), 'error',
           'entries but stride')
    defect('tensor_size_not_tuple.pt', z(one_tensor(raw_shape=i(5) + tup(i(1)))),
           'error', 'size is not a tuple')
    defect('tensor_zero_numel_huge_dims.pt', z(one_tensor(size=(0, 1 << 40, 1 << 40), stride=(1, 1, 1))), 'ok')
    defect('tensor_zero_numel_huge_offset.pt', z(one_tensor(offset=(1 << 63) - 1, size=(0,), stride=(1,))), 'ok')
    defect('tensor_rebuild_too_few_args.pt', z(state_dict(('w', glob('torch._utils', '_rebuild_tensor_v2') +
                                                           tup(pid(), i(0)) + REDUCE))), 'error',
           'takes 6 arguments, got 2')
    defect('tensor_rebuild_without_storage.pt', z(one_tensor(raw_pid=i(3))), 'error', 'without a storage')
    defect('tensor_rebuild_args_not_tuple.pt', z(state_dict(('w', glob('torch._utils', '_rebuild_tensor_v2') +
                                                             EMPTY_LIST + REDUCE))), 'error', 'not a tuple')
    defect('tensor_v3_dtype_not_dtype.pt', z(one_tensor(rebuild='_rebuild_tensor_v3', cls='UntypedStorage',
                                                        numel=60, extra=i(3))), 'error', 'not a torch dtype')
    defect('tensor_untyped_without_v3.pt', z(one_tensor(cls='UntypedStorage', numel=60)), 'error',
           'needs _rebuild_tensor_v3')
    defect('storage_unknown_class.pt', z(one_tensor(cls='FooStorage')), 'error', 'unknown storage class torch.FooStorage')
    defect('storage_class_is_os_system.pt', z(one_tensor(raw_pid=tup(u('storage'), glob('os', 'system'), u('0'),
                                                                     u('cpu'), i(15)) + BINPERSID)),
           'error', 'unknown storage class os.system')
    defect('storage_numel_huge.pt', z(one_tensor(numel=1 << 62)), 'error', 'storage size overflows')
    defect('storage_numel_larger_than_record.pt', z(one_tensor(numel=1 << 40)), 'error',
           "record 'archive/data/0' holds 60 bytes but its storage needs 4398046511104")
    defect('legacy_storage_numel_larger_than_file.pt', legacy(legacy_tensor(numel=1 << 40)), 'error',
           'larger than the file')
    defect('storage_numel_negative.pt', z(one_tensor(numel=-15)), 'error', 'not a non-negative integer')
    defect('storage_key_too_long.pt', z(one_tensor(key='k' * 100)), 'error', 'not a short string')
    defect('storage_pid_not_storage.pt', z(one_tensor(raw_pid=tup(u('module'), i(1)) + BINPERSID)), 'error',
           'not a storage reference')
    defect('storage_pid_wrong_arity.pt', z(one_tensor(raw_pid=tup(u('storage'), glob('torch', 'FloatStorage'),
                                                                  u('0'), u('cpu'), i(15), NONE) + BINPERSID)),
           'error', 'fields, not 5')
    two = state_dict(('a', tensor()), ('b', tensor(numel=10, size=(10,), stride=(1,))))
    defect('storage_declared_twice_differently.pt', z(two), 'error', 'declared with 10 elements, earlier with 15')
    # one key set twice in one dict (no pickler writes it; torch.load keeps the last): refused
    defect('tensor_duplicate_names.pt', z(PROTO2 + EMPTY_DICT + MARK + u('w') + tensor() + u('w') + tensor() +
                                          SETITEMS + STOP), 'error', "two tensors are named 'w' by the same key path")
    defect('tensor_name_with_nul.pt', z(state_dict(('w\0hidden', tensor()))), 'ok')
    # names are byte strings (issue 33): 'w\0x' and 'w\0y' are two names
    defect('tensor_names_equal_up_to_nul.pt', z(state_dict(('w\0x', tensor()), ('w\0y', tensor()))), 'ok')
    # billion laughs through tensors: 2**22 names for one tensor in 22 levels of shared dicts
    b = PROTO2 + EMPTY_DICT + u('t') + tensor() + SETITEM + put(0) + POP
    for k in range(1, 23):
        b += EMPTY_DICT + MARK + u('a') + get(k - 1) + u('b') + get(k - 1) + SETITEMS + put(k) + POP
    defect('tensor_laughs_4m_names.pt', z(b + get(22) + STOP), 'error', 'names')
    # one tensor 1000 dicts deep under a 64 KiB key: a 64 MB name
    b = PROTO2 + u('k' * (64 << 10)) + put(0) + POP + (EMPTY_DICT + get(0)) * 999 + tensor() + SETITEM * 999 + STOP
    defect('tensor_name_64mb.pt', z(b), 'error', 'name')
    defect('tensor_refused_sparse.pt', z(state_dict(('w', glob('torch._utils', '_rebuild_sparse_tensor') +
                                                     tup(i(0)) + REDUCE))), 'error',
           "'w' cannot be read: sparse")


def legacy_defects():
    obj = legacy_tensor()
    defect('legacy_good.pt', legacy(obj), 'ok')
    defect('legacy_count_mismatch.pt', legacy(obj, data=((16, FLOATS15 + b'\0' * 4),)), 'error',
           'holds 16 elements but the pickle declared 15')
    defect('legacy_count_huge.pt', legacy(obj, data=((-1, FLOATS15),)), 'error', 'but the pickle declared 15')
    defect('legacy_storage_truncated.pt', legacy(obj, data=((15, FLOATS15[:30]),)), 'error',
           'runs past the end of the file')
    defect('legacy_count_header_truncated.pt', legacy(obj, data=()) + b'\x0f\x00', 'error',
           'truncated legacy storage header')
    defect('legacy_protocol_1000.pt', legacy(obj, proto=b'\x80\x02M\xe8\x03.'), 'error', 'protocol version is not 1001')
    defect('legacy_sys_info_not_dict.pt', legacy(obj, sys_info=PROTO2 + NONE + STOP), 'error',
           'sys_info is not a dict')
    defect('legacy_keys_not_list.pt', legacy(obj, keys_pickle=PROTO2 + i(1) + STOP), 'error',
           'storage key list is not a list')
    defect('legacy_key_unknown.pt', legacy(obj, keys=('9',)), 'error', 'is not used by the object')
    defect('legacy_key_twice.pt', legacy(obj, keys=('0', '0'), data=((15, FLOATS15), (15, FLOATS15))), 'error',
           'listed twice')
    defect('legacy_storage_without_data.pt', legacy(obj, keys=(), data=()), 'error', 'has no data in the file')
    defect('legacy_object_truncated.pt', (LEGACY_MAGIC + LEGACY_PROTO + SYS_INFO + obj)[:-20], 'error',
           'truncated pickle')
    defect('legacy_view_outside_root.pt', legacy(legacy_tensor(view=('v', 10, 10), size=(10,), stride=(1,))),
           'error', 'lies outside storage')
    defect('legacy_view_is_own_root.pt', legacy(legacy_tensor(view=('0', 0, 5), size=(5,), stride=(1,))),
           'error', 'reused with another root')
    defect('legacy_view_good.pt', legacy(legacy_tensor(view=('v', 5, 10), size=(10,), stride=(1,))), 'ok')
    defect('legacy_view_tensor_past_view.pt', legacy(legacy_tensor(view=('v', 5, 10), size=(11,), stride=(1,))),
           'error', 'reaches byte 44')
    defect('legacy_pid_wrong_arity.pt', legacy(state_dict(('w', tensor(raw_pid=pid()))), keys=()), 'error',
           'fields, not 6')


def tar_defects():
    good = tar_simple()
    defect('tar_good.pt', good, 'ok')
    offs = tar_header_offsets(good)
    defect('tar_member_size_lie.pt', tar_set(good, offs[3], 124, b'77777777777\x00'), 'error',
           'runs past the end of the file')
    defect('tar_member_size_base256_huge.pt', tar_set(good, offs[2], 124, b'\x80' + b'\x00' * 3 + b'\x7f' + b'\xff' * 7),
           'error', 'runs past the end of the file')
    defect('tar_member_size_base256_negative.pt', tar_set(good, offs[2], 124, b'\xff' * 12), 'error',
           'bad TAR size field')
    defect('tar_member_size_garbage.pt', tar_set(good, offs[1], 124, b'12x45678901\x00'), 'error',
           'bad TAR size field')
    b = bytearray(good)
    b[offs[2] + 10] ^= 0x55
    defect('tar_bad_checksum.pt', bytes(b), 'error', 'TAR header checksum mismatch')
    defect('tar_missing_tensors_member.pt', tar_with(tensors=None), 'error', "has no 'tensors' member")
    defect('tar_truncated_in_header.pt', good[:offs[3] + 100], 'error', "has no 'pickle' member")
    defect('tar_truncated_in_member.pt', good[:offs[3] + 512 + 10], 'error', 'runs past the end of the file')
    defect('tar_storage_count_huge.pt', tar_simple(storages=PROTO2 + i(1 << 40) + STOP), 'error',
           'bad storage count')
    defect('tar_storage_elements_lie.pt',
           tar_simple(storages=storages_member([(1, 'FloatStorage', 1 << 40, FLOATS15)])), 'error',
           'runs past its member')
    defect('tar_storage_elements_overflow.pt',
           tar_simple(storages=storages_member([(1, 'DoubleStorage', 1 << 62, FLOATS15)])), 'error',
           'runs past its member')
    defect('tar_storage_key_twice.pt',
           tar_simple(storages=storages_member([(1, 'FloatStorage', 15, FLOATS15), (1, 'FloatStorage', 15, FLOATS15)])),
           'error', 'appears twice')
    defect('tar_storage_unknown_class.pt',
           tar_simple(storages=storages_member([(1, 'FooStorage', 15, FLOATS15)])), 'error', 'bad storage header')
    defect('tar_view_outside_root.pt',
           tar_simple(storages=storages_member([(1, 'FloatStorage', 15, FLOATS15)], views=[(2, 1, 10, 10)])),
           'error', 'lies outside its root')
    defect('tar_view_missing_root.pt',
           tar_simple(storages=storages_member([(1, 'FloatStorage', 15, FLOATS15)], views=[(2, 5, 0, 10)])),
           'error', 'has no root storage 5')
    defect('tar_tensor_count_huge.pt', tar_simple(tensors=PROTO2 + i(1 << 40) + STOP), 'error', 'bad tensor count')
    defect('tar_tensor_rank_65.pt', tar_simple(tensors=tensors_member([(7, 1, 65, (1,) * 65, (1,) * 65, 0)])),
           'error', '65 dimensions')
    defect('tar_tensor_rank_negative.pt', tar_simple(tensors=tensors_member([(7, 1, -1, (), (), 0)])),
           'error', '-1 dimensions')
    defect('tar_tensor_rank_lie.pt', tar_simple(tensors=tensors_member([(7, 1, 60, (5, 3), (3, 1), 0)])),
           'error', 'TAR tensors: truncated')
    defect('tar_tensor_negative_stride.pt', tar_simple(tensors=tensors_member([(7, 1, 2, (5, 3), (-3, 1), 0)])),
           'error', 'negative size or stride')
    defect('tar_tensor_negative_offset.pt', tar_simple(tensors=tensors_member([(7, 1, 2, (5, 3), (3, 1), -1)])),
           'error', 'negative storage offset')
    defect('tar_tensor_shape_overflow.pt',
           tar_simple(tensors=tensors_member([(7, 1, 2, (1 << 62, 1 << 62), (1, 1), 0)])), 'error',
           'element count overflows')
    defect('tar_tensor_past_storage.pt', tar_simple(tensors=tensors_member([(7, 1, 2, (5, 3), (3, 1), 1)])),
           'error', 'reaches byte 64')
    defect('tar_tensor_missing_storage.pt', tar_simple(tensors=tensors_member([(7, 4, 2, (5, 3), (3, 1), 0)])),
           'error', 'refers to missing storage 4')
    defect('tar_pickle_unknown_tensor.pt',
           tar_simple(pickle=PROTO2 + EMPTY_DICT + MARK + u('w') + b'P8\n' + SETITEMS + STOP), 'error',
           "tensor '8', which is not in 'tensors'")


def misc_defects():
    defect('empty.pt', b'', 'error', 'file is empty')
    defect('not_a_checkpoint.pt', b'\x00\x01\x02\x03' * 16, 'error', 'not a checkpoint')
    defect('one_byte_zip_magic.pt', b'P', 'error', 'not a checkpoint')
    defect('zip_magic_only.pt', b'PK\x03\x04', 'error', 'too short')


def display_defects():
    """Text that would drive a terminal: ckpt must show it escaped
    (tests/cli_display_test.sh holds the exact expected output)."""
    def raw_u(b):
        return b'X' + struct.pack('<I', len(b)) + b  # BINUNICODE of raw bytes
    # a pickle that runs posix.system under torch.load and then tries to erase
    # that line from the screen: a class whose module name is cursor-up,
    # erase-line, carriage return; a C1 CSI (U+009B) and a bidi override in
    # keys, backspaces in a global's name, bytes that are not UTF-8
    b = PROTO2 + EMPTY_DICT + MARK
    b += u('model') + glob('posix', 'system') + tup(u('echo pwned')) + REDUCE
    b += u('epoch') + b'c\x1b[1A\x1b[2K\rcollections\nOrderedDict\n' + EMPTY_TUPLE + REDUCE
    b += u('\u202etxt.exe') + i(1)
    b += u('a\u009b2Jb') + i(2)
    b += u('hook') + b'cbuiltins\nprint\x08\x08\x08\x08\x08\n'
    b += raw_u(b'\xff\xfekey') + u('caf\xe9 \x1b]0;title\x07')
    b += u('back\\slash') + b'C\x04\x00\x1b\x7f\x80'
    defect('pkl_terminal_escapes.pkl', b + SETITEMS + STOP, 'ok')
    # tensor names and a storage key that are not plain text
    pk = PROTO2 + EMPTY_DICT + MARK
    pk += raw_u(b'w\xff') + tensor(size=(5,), stride=(1,))
    pk += u('a\x1b[31mred') + tensor(size=(3,), stride=(1,))
    pk += u('b') + tensor(key='s\x07', size=(15,), stride=(1,))
    defect('zip_names_escapes.pt', torch_zip(pk + SETITEMS + STOP, storages=(('0', FLOATS15),
                                                                              ('s\x07', FLOATS15)))[0], 'ok')


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, 'files')
    os.makedirs(out, exist_ok=True)
    for g in (zip_defects, pickle_defects, tensor_defects, legacy_defects, tar_defects, misc_defects,
              display_defects):
        g()
    names = [d[0] for d in DEFECTS]
    assert len(names) == len(set(names)), 'duplicate defect names'
    for n in os.listdir(out):
        if n not in names:
            os.remove(os.path.join(out, n))
    rows = ['# file\tverdict\texpected message substring (written by gen_defects.py; do not edit)']
    total = 0
    for name, data, verdict, sub in DEFECTS:
        assert '\t' not in sub and '\n' not in sub
        with open(os.path.join(out, name), 'wb') as fh:
            fh.write(data)
        total += len(data)
        rows.append('%s\t%s\t%s' % (name, verdict, sub))
    with open(os.path.join(HERE, 'manifest.tsv'), 'w') as fh:
        fh.write('\n'.join(rows) + '\n')
    print('%d defects, %d bytes in %s' % (len(DEFECTS), total, out))


if __name__ == '__main__':
    main()
