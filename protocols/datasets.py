"""The real data sets the shipped scenarios read: where each comes from, its licence, and one
data folder they are all read from.

None of them is shipped with ldpsim (SUSHI's licence forbids redistribution; the others state
no licence). A scenario names a file of one by its place in the data folder, ``data:NAME/FILE``
(``[data] path = "data:sushi/kamishima/sushi3a.5000.10.order"``), and ``resolve`` finds it in
the folder ``LDPSIM_DATA`` names (``ldpsim run --data-dir DIR`` sets it), by default
``shared/data`` beside the checkout. A plain path (one's own copy anywhere) is read as it is.

A named file that is missing is ``MissingData``: one line naming the data set, the file, the
folder, how to choose another folder and where to get the data (``DataSet.obtain``). ``ldpsim
data`` lists the catalogue (``DATASETS``) and whether each data set is present.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ldpsim.protocols.base import ParamError

from ldpsim import environment

#: how a scenario names a file of the data folder: ``data:NAME/FILE``
PREFIX = "data:"
#: the data folder when ``LDPSIM_DATA`` is unset: ``shared/data`` beside the checkout
DEFAULT_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
#: how the scenarios spelled a named file before data sets were named: the run keys and
#: fingerprints of their runs hash this spelling (``key_form``), so they stay as they were
LEGACY_PREFIX = "../shared/data/"


@dataclass(frozen=True)
class DataSet:
    """One real data set: its name (its folder in the data folder), the files the scenarios
    read (relative to the data folder), where it comes from, its licence and how to get it."""

    name: str
    title: str
    files: tuple[str, ...]
    source: str
    citation: str
    licence: str
    obtain: str


DATASETS: dict[str, DataSet] = {d.name: d for d in (
    DataSet(
        "sushi", "SUSHI preference rankings, set A: 5000 people rank 10 sushi",
        ("sushi/kamishima/sushi3a.5000.10.order",),
        "T. Kamishima, SUSHI Preference Data Sets, https://www.kamishima.net/sushi/ "
        "(also PrefLib ED-00014, under the same terms)",
        "T. Kamishima, Nantonac Collaborative Filtering: Recommendation Based on Order "
        "Responses, KDD 2003",
        "research use only; must not be redistributed without the authors' permission; "
        "cite the paper",
        "download sushi3-2016.zip from the authors' page https://www.kamishima.net/sushi/ "
        "and put its sushi3a.5000.10.order in sushi/kamishima/"),
    DataSet(
        "jester", "Jester joke ratings (Dataset 2+), the users with ids 1-1000",
        ("jester/jester_ratings.csv",),
        "Jester, http://eigentaste.berkeley.edu/dataset/ (the shipped figures use the first "
        "1000 user ids of its jester_ratings.csv)",
        "K. Goldberg, T. Roeder, D. Gupta, C. Perkins, Eigentaste: A Constant Time "
        "Collaborative Filtering Algorithm, Information Retrieval 4(2), 2001",
        "no licence stated; the Jester page asks users to cite the paper",
        "download Dataset 2+ from http://eigentaste.berkeley.edu/dataset/ and keep the rows "
        "of userId 1-1000 of jester_ratings.csv (header userId,jokeId,rating) as "
        "jester/jester_ratings.csv"),
    DataSet(
        "turkdots", "Mechanical Turk Dots: 795 rankings of 4 dot pictures (PrefLib ED-00024)",
        tuple(f"turkdots/00024-0000000{i}.soc" for i in range(1, 5)),
        "PrefLib ED-00024, https://www.preflib.org/dataset/00024 (GitHub PrefLib/PrefLib-Data, "
        "datasets/00024 - dots/)",
        "A. Mao, A. D. Procaccia, Y. Chen, Better Human Computation Through Principled Voting, "
        "AAAI 2013; N. Mattei, T. Walsh, PrefLib: A Library for Preferences, ADT 2013",
        "no licence stated; PrefLib asks users to cite the original source",
        "download the four 00024-*.soc files from https://www.preflib.org/dataset/00024 "
        "into turkdots/"),
    DataSet(
        "turkpuzzle", "Mechanical Turk Puzzle: 793 rankings of 4 8-puzzle states "
                      "(PrefLib ED-00025)",
        tuple(f"turkpuzzle/00025-0000000{i}.soc" for i in range(1, 5)),
        "PrefLib ED-00025, https://www.preflib.org/dataset/00025 (GitHub PrefLib/PrefLib-Data, "
        "datasets/00025 - puzzle/)",
        "A. Mao, A. D. Procaccia, Y. Chen, Better Human Computation Through Principled Voting, "
        "AAAI 2013; N. Mattei, T. Walsh, PrefLib: A Library for Preferences, ADT 2013",
        "no licence stated; PrefLib asks users to cite the original source",
        "download the four 00025-*.soc files from https://www.preflib.org/dataset/00025 "
        "into turkpuzzle/"),
    DataSet(
        "web", "Web search relevance: 177 workers grade 2665 query-URL pairs on 5 levels",
        ("web/web_crowd.txt", "web/web_truth.txt"),
        "GitHub zhangyuc/SpectralMethodsMeetEM, src/web_crowd.txt and src/web_truth.txt "
        "(commit 6204f5f)",
        "D. Zhou, J. Platt, S. Basu, Y. Mao, Learning from the Wisdom of Crowds by Minimax "
        "Entropy, NIPS 2012",
        "no licence stated; cite the paper",
        "download src/web_crowd.txt and src/web_truth.txt of "
        "https://github.com/zhangyuc/SpectralMethodsMeetEM into web/"),
    DataSet(
        "adultcontent", "AdultContent: 825 workers rate 11040 websites G/P/R/X",
        ("adultcontent/ipeirotis_gal/labels.txt", "adultcontent/ipeirotis_gal/gold.txt"),
        "GitHub ipeirotis/Get-Another-Label, data/AdultContent2/ (the same data as "
        "answer.csv and truth.csv of Zheng et al.'s 2017 benchmark)",
        "P. G. Ipeirotis, F. Provost, J. Wang, Quality Management on Amazon Mechanical Turk, "
        "HCOMP 2010",
        "no licence stated; cite the paper",
        "download labels.txt and gold.txt of data/AdultContent2/ in "
        "https://github.com/ipeirotis/Get-Another-Label into adultcontent/ipeirotis_gal/"),
)}


class MissingData(ParamError):
    """A named data file is not in the data folder (one line: ``missing_line``)."""


def data_dir() -> Path:
    """The data folder: ``$LDPSIM_DATA`` when set (``ldpsim run --data-dir`` sets it), else
    ``DEFAULT_DIR``."""
    value = os.environ.get(environment.DATA)
    return Path(value).expanduser() if value else DEFAULT_DIR


def named(path: str) -> str | None:
    """The part of ``path`` after ``data:`` (``NAME/FILE``), or None for a plain path."""
    return path[len(PREFIX):].lstrip("/") if isinstance(path, str) and path.startswith(
        PREFIX) else None


def dataset_of(path: str) -> DataSet | None:
    """The catalogue's entry of a named path (its first component), None if it has none."""
    rel = named(path)
    return DATASETS.get(rel.split("/", 1)[0]) if rel else None


def missing_line(rel: str, folder: Path) -> str:
    """The one line that says which data set is missing, which file was looked for in which
    folder, how to choose another folder and where to get the data."""
    ds = DATASETS.get(rel.split("/", 1)[0])
    what = f"data set {ds.name!r}" if ds else f"data {rel.split('/', 1)[0]!r}"
    get = (f"to get it, {ds.obtain} (licence: {ds.licence})" if ds else
           "it is no data set of the catalogue (`ldpsim data` lists them)")
    return (f"{what} is missing: no {rel} in the data folder {folder}; set the folder with "
            f"{environment.DATA}=DIR or `ldpsim run --data-dir DIR`; {get}")


def resolve(path: str, directory: bool = False) -> Path:
    """The file (or, ``directory``, the folder) ``path`` names: ``data:NAME/FILE`` in the data
    folder, else the path itself. A named one that is absent raises ``MissingData``; a plain
    one that is absent is left to the loader to report."""
    rel = named(path)
    if rel is None:
        return Path(path).expanduser()
    folder = data_dir()
    found = folder / rel
    if not (found.is_dir() if directory else found.is_file()):
        ds = dataset_of(path)  # a folder: the first of its data set's files in it
        inside = [f for f in (ds.files if ds else ()) if f.startswith(rel.rstrip("/") + "/")]
        raise MissingData(missing_line(inside[0] if directory and inside else rel, folder))
    return found


def check_present(path: str, directory: bool = False) -> None:
    """Raise ``MissingData`` when ``path`` names a data file that is absent (a scenario's
    check before any process starts); a plain path is the loader's to check."""
    if named(path) is not None:
        resolve(path, directory)


def key_form(value: object) -> object:
    """``value`` as run keys and fingerprints hash it: a named path in the spelling the
    scenarios used before (``../shared/data/NAME/FILE``), anything else as it is."""
    rel = named(value) if isinstance(value, str) else None
    return value if rel is None else LEGACY_PREFIX + rel


def present(ds: DataSet, folder: Path | None = None) -> bool:
    """Whether every file of ``ds`` is in ``folder`` (default: the data folder)."""
    folder = data_dir() if folder is None else folder
    return all((folder / f).is_file() for f in ds.files)
