"""Find WordNet 3.0 offline for METEOR's synonym matching.

Looked for, in order: NLTK's own ``corpora/wordnet`` (if a user installed it),
then the WordNet database files of Debian's ``wordnet-base`` (``$WNSEARCHDIR`` or
``/usr/share/wordnet``). NLTK's reader also wants a ``lexnames`` file, which
Debian does not ship; we carry its 45 lines (from the lexnames(5WN) manual) and
copy the database once into a cache folder, because NLTK refuses to read through
symbolic or hard links that leave its data roots. Nothing is downloaded.
"""
from __future__ import annotations

import hashlib
import io
import marshal
import os
import re
import shutil
import warnings
from functools import lru_cache
from pathlib import Path

from evaluators.core.errors import EvalError
from evaluators.metrics._nltk import import_nltk

_FILES = [f"{kind}.{pos}" for kind in ("data", "index") for pos in ("adj", "adv", "noun", "verb")] + [
    f"{pos}.exc" for pos in ("adj", "adv", "noun", "verb")
] + ["index.sense"]
INSTALL_HINT = (
    "METEOR needs WordNet 3.0 and none was found. Install it with the README's set-up "
    "(Debian/Ubuntu: apt-get install wordnet-base wordnet-sense-index), or set WNSEARCHDIR "
    "to a folder holding WordNet's data.* and index.* files."
)


class WordNetMissing(EvalError):
    """WordNet's data files are not on this machine."""


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "evaldash" / "nltk_data"


def _materialise(src: Path) -> Path:
    """Copy WordNet's files plus our lexnames into the cache once; return the corpus folder."""
    dest = _cache_root() / "corpora" / "wordnet"
    marker = dest / ".complete"
    if marker.exists():
        return dest
    tmp = dest.with_name("wordnet.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in _FILES:
        shutil.copyfile(src / name, tmp / name)
    shutil.copyfile(Path(__file__).with_name("wordnet_lexnames.txt"), tmp / "lexnames")
    (tmp / ".complete").write_text(str(src))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)  # atomic: a half-copied folder is never used
    return dest


def _debian_dir() -> Path | None:
    # WNSEARCHDIR, when set, is the only place looked at (WordNet's own convention).
    cand = os.environ.get("WNSEARCHDIR") or "/usr/share/wordnet"
    return Path(cand) if all((Path(cand) / f).is_file() for f in _FILES) else None


def _reader_class():
    import_nltk()
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class EnglishWordNet(WordNetCorpusReader):
        """NLTK's WordNet reader minus one start-up step METEOR never uses.

        On opening, NLTK maps this WordNet's synsets to WordNet 3.0's for the
        multilingual (OMW) tables (``map30``), reading ``index.sense`` twice: ~8 s of a
        ~15 s load. Only ``custom_lemmas`` (OMW) reads that map; ``synsets()`` and
        ``lemmas()`` in English, all METEOR asks, do not. A test checks the lemma index
        and exception lists equal those of NLTK's own reader.
        """

        def map_wn(self, version="wordnet"):
            return None

        # NLTK parses the four index files, the exception lists and the adjective data file
        # into Python structures on every start (~2.5 s, more than all of METEOR's own work on
        # 10,000 short pairs). We keep what that parse produces in one marshal file beside our
        # copy of WordNet, keyed by NLTK's version and the source files' sizes and mtimes, and
        # read it back in ~0.2 s. A missing, stale or unreadable cache is rebuilt by NLTK's code.
        def _scan_satellites(self):
            cached = _index_cache_read(self._root)
            if cached is None:
                super()._scan_satellites()
                self._fresh = True
                return
            self.satellite_offsets, lemmas, self._exception_map = cached
            self._lemma_pos_offset_map.update(lemmas)
            self._fresh = False

        def _load_lemma_pos_offset_map(self):
            if self._fresh:
                super()._load_lemma_pos_offset_map()

        def _load_exception_map(self):
            if self._fresh:
                super()._load_exception_map()
                _index_cache_write(self._root, self.satellite_offsets, self._lemma_pos_offset_map,
                                   self._exception_map)

        def open(self, fileid):
            # The index, exception and lexname files are read line by line once, at start-up:
            # through Python's own text file rather than NLTK's seekable stream reader, whose
            # pure-Python readline is ~5x slower. Same bytes, same decoding, same lines.
            # The data files, which NLTK seeks in, keep NLTK's reader.
            if fileid.startswith("data."):
                return super().open(fileid)
            return io.TextIOWrapper(self._root.join(fileid).open(), encoding=self._encoding)

    return EnglishWordNet


def _index_cache_path(root) -> Path | None:
    """Where the parsed index of the WordNet at ``root`` is kept (None when ``root`` is not a folder)."""
    nltk = import_nltk()

    folder = Path(getattr(root, "path", root))  # NLTK hands a FileSystemPathPointer
    if not folder.is_dir():
        return None
    stamp = [nltk.__version__, str(folder.resolve())]
    for name in _FILES + ["lexnames"]:
        f = folder / name
        st = f.stat() if f.is_file() else None
        stamp.append(f"{name}:{st.st_size}:{st.st_mtime_ns}" if st else f"{name}:-")
    key = hashlib.sha256("|".join(stamp).encode()).hexdigest()[:16]
    return _cache_root() / f"wordnet-index-{key}.marshal"


def _index_cache_read(root):
    """(satellite offsets, lemma index, exception lists) from the cache, or None."""
    path = _index_cache_path(root)
    if path is None or not path.is_file():
        return None
    try:
        sat, lemmas, exc = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return sat, lemmas, exc


def _index_cache_write(root, satellites, lemmas, exceptions) -> None:
    path = _index_cache_path(root)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps((set(satellites), dict(lemmas), dict(exceptions))))
        tmp.replace(path)  # atomic: a reader never sees half a file
    except OSError:  # a read-only home: the next process parses again, nothing else changes
        pass


@lru_cache(maxsize=1)
def load_wordnet():
    """The WordNet reader METEOR uses (loaded once per process, ~5 s).

    Raises:
        WordNetMissing: with install instructions, when no WordNet is found.
    """
    nltk = import_nltk()

    try:
        found = nltk.data.find("corpora/wordnet")
    except LookupError:
        found = None
    if found is None:  # a user-installed NLTK WordNet wins
        src = _debian_dir()
        if src is None:
            raise WordNetMissing(INSTALL_HINT)
        folder = _materialise(src)
        root = str(folder.parent.parent)
        if root not in nltk.data.path:
            # NLTK only opens files under its data roots; ours is a private cache folder.
            nltk.data.path.append(root)
        found = str(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available": expected, no OMW
        return _reader_class()(found, None)


_SYNTACTIC_MARKER = re.compile(r"(.*?)(\([^()]*\))?$")  # NLTK's: "long(a)" -> "long"


@lru_cache(maxsize=1)
def _data_files() -> dict[str, bytes]:
    """WordNet's four data files, whole, keyed by NLTK's part-of-speech letters."""
    wn = load_wordnet()
    return {pos: wn.root.join(f"data.{name}").open().read() for pos, name in wn._FILEMAP.items()}


@lru_cache(maxsize=200_000)
def _synset_lemma_names(pos: str, offset: int) -> tuple[str, ...]:
    data = _data_files()[pos]
    line = data[offset:data.index(b"\n", offset)].decode("utf-8")
    columns = line.split("|")[0].split()
    if columns[0] != f"{offset:08d}":
        raise WordNetMissing(f"WordNet data.{pos}: no synset at offset {offset}; the files are damaged")
    count = int(columns[3], 16)
    return tuple(_SYNTACTIC_MARKER.match(name).group(1) for name in columns[4:4 + 2 * count:2])


@lru_cache(maxsize=1)
def _morphy_tables():
    """(WordNet reader, [(pos, its exception list, its suffix rules)] for NLTK's ``POS_LIST``)."""
    from nltk.corpus.reader.wordnet import POS_LIST

    wn = load_wordnet()
    return wn, [(pos, wn._exception_map[pos], tuple(wn.MORPHOLOGICAL_SUBSTITUTIONS[pos])) for pos in POS_LIST]


def lemma_names(word: str) -> set[str]:
    """``{l.name() for s in wordnet.synsets(word) for l in s.lemmas()}``, without building synsets.

    NLTK's ``synsets()`` parses each synset's whole data line (gloss, examples, every
    pointer) into objects; METEOR reads only the lemma names, which head the line. The
    lookup is NLTK's ``_morphy`` (the word itself and either its exception-list forms or
    its suffix-rule forms, those in the lemma index under that part of speech) written
    inline: the names are a set, so ``_morphy``'s order and de-duplication change nothing.
    A test checks the result on thousands of words against ``synsets()``.
    """
    wn, tables = _morphy_tables()
    lemma = word.lower()
    index = wn._lemma_pos_offset_map
    names: set[str] = set()
    for pos, exceptions, substitutions in tables:
        forms = exceptions.get(lemma)
        if forms is None:
            forms = [lemma[:-len(old)] + new for old, new in substitutions if lemma.endswith(old)]
        for form in (lemma, *forms):
            entry = index.get(form)
            if entry:
                for offset in entry.get(pos, ()):
                    names.update(_synset_lemma_names(pos, offset))
    return names
