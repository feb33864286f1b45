#!/bin/sh
# make_corpus.sh - derive the seed corpus of every fuzz target from the test
# fixtures (tests/fixtures) and the generated defects (tests/defects/files):
#
#   fuzz/corpus/open/    whole files, as they are
#   fuzz/corpus/pickle/  the object pickles alone (ZIP data.pkl, the legacy
#                        object pickle, TAR 'pickle' member, plain pickles)
#   fuzz/corpus/zip/     mode byte + data.pkl (stored, deflated, ZIP64, big
#                        endian) and patch-mode seeds (see fuzz_zip.c)
#   fuzz/corpus/tar/     raw archives and member lists (see fuzz_tar.c)
#   fuzz/corpus/legacy/  legacy streams without their first three pickles
#
# Only small seeds are written (each <= 64 KiB) so the committed corpus stays
# well under 2 MB.  Idempotent: each corpus folder is emptied first; files a
# fuzzer added later belong in a separate folder, not here.
#
# usage: fuzz/make_corpus.sh [REPO_ROOT]       (python3, stdlib only)
set -eu
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
exec python3 - "$root" <<'PY'
import io, os, pickletools, sys, tarfile, zipfile
root = sys.argv[1]
fix = os.path.join(root, 'tests', 'fixtures')
dfx = os.path.join(root, 'tests', 'defects', 'files')
out = os.path.join(root, 'fuzz', 'corpus')
MAXSEED = 64 << 10
SEP = b'\n#TAR#\n'

def files(d):
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, n) for n in os.listdir(d)
                  if not n.endswith('.json') and not n.startswith('.'))

def pickle_ends(data, start, count):
    """Offsets just past each of `count` consecutive pickles from `start`."""
    f = io.BytesIO(data)
    f.seek(start)
    ends = []
    for _ in range(count):
        for _ in pickletools.genops(f):
            pass
        ends.append(f.tell())
    return ends

seeds = {t: {} for t in ('open', 'pickle', 'zip', 'tar', 'legacy')}
def add(target, name, data):
    if len(data) <= MAXSEED:
        seeds[target][name] = data

for path in files(fix) + files(dfx):
    name = os.path.basename(path)
    data = open(path, 'rb').read()
    add('open', name, data)
    stem = name.rsplit('.', 1)[0]
    if data[:4] == b'PK\x03\x04':
        try:
            z = zipfile.ZipFile(io.BytesIO(data))
            pkl = [i for i in z.namelist() if i.endswith('/data.pkl')]
            if not pkl:
                continue
            p = z.read(pkl[0])
        except Exception:
            continue
        add('pickle', stem + '.data.pkl', p)
        if path.startswith(fix):
            add('zip', stem + '.stored', b'\x00' + p)
            add('zip', stem + '.deflate', b'\x01' + p)
    elif data[:2] == b'\x80\x02' and b'\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19' in data[:20]:
        try:
            e = pickle_ends(data, 0, 4)
        except Exception:
            continue
        add('pickle', stem + '.object.pkl', data[e[2]:e[3]])
        add('legacy', stem, data[e[2]:])
    elif len(data) >= 512 and data[257:262] == b'ustar':
        add('tar', stem + '.raw', b'\x01' + data)
        try:
            t = tarfile.open(fileobj=io.BytesIO(data))
            parts = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
        except Exception:
            continue
        members = [parts.get(n, b'') for n in ('sys_info', 'storages', 'tensors', 'pickle')]
        add('tar', stem + '.members', b'\x00' + SEP.join(members))
        add('tar', stem + '.pax', b'\x02' + SEP.join(members))
        add('tar', stem + '.b256', b'\x0c' + SEP.join(members))
        add('pickle', stem + '.pickle.pkl', parts.get('pickle', b''))
    elif path.startswith(fix) and name.endswith('.pkl'):
        add('pickle', name, data)

# patch-mode ZIP seeds: the template as is, with ZIP64 fields, big endian,
# deflated storages, no version record; and one lie in each header kind.
for mode in (0x02, 0x03, 0x06, 0x0a, 0x12, 0x22, 0x1b):
    add('zip', 'template.%02x' % mode, bytes([mode]))

for t, d in seeds.items():
    dd = os.path.join(out, t)
    os.makedirs(dd, exist_ok=True)
    for n in os.listdir(dd):
        os.remove(os.path.join(dd, n))
    for n, data in sorted(d.items()):
        with open(os.path.join(dd, n), 'wb') as fh:
            fh.write(data)
    print('%-7s %4d seeds %8d bytes' % (t, len(d), sum(map(len, d.values()))))
PY
