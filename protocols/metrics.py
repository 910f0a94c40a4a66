"""What a metric means: its label, unit, range and which direction is better.

A protocol declares its utility metrics once, in ``Protocol.metrics``, as :class:`Metric`
objects; the summary table's legend, the plots' axis labels and bands, the documentation's
per-family tables and the Python API all read them from there. A ``Metric`` *is* its name (a
``str`` subclass), so every place that handles metric names (records, ``[plot] y``, the summary
columns) keeps working with plain strings, and ``"kendall_tau" in protocol.metrics`` holds.
"""

from __future__ import annotations

from typing import Any

#: the directions a metric may have: which way is better (None: neither, e.g. a count)
BETTER = ("lower", "higher", None)


class Metric(str):
    """A metric's name with what it means.

    Parameters
    ----------
    name : str
        The key ``evaluate`` returns (and the record's ``metrics`` holds).
    label : str
        What a reader sees on an axis or in a table's legend, e.g. ``"Kendall tau distance
        (normalised)"``.
    unit : str, optional
        The unit, empty for a pure number or a fraction (e.g. ``"B"``, ``"s"``).
    low, high : float or None, optional
        The range the metric lives in (None: unbounded on that side); a plot clips its
        confidence bands to it.
    better : {"lower", "higher", None}
        Which direction is better (None: neither).
    about : str, optional
        One sentence: what is measured, citing the paper's equation where it has one.
    """

    label: str
    unit: str
    low: float | None
    high: float | None
    better: str | None
    about: str

    def __new__(cls, name: str, label: str, *, unit: str = "", low: float | None = None,
                high: float | None = None, better: str | None = None,
                about: str = "") -> Metric:
        if better not in BETTER:
            raise ValueError(f"Metric {name!r}: better = {better!r}; allowed: 'lower', "
                             "'higher' or None")
        if low is not None and high is not None and not low < high:
            raise ValueError(f"Metric {name!r}: range [{low}, {high}] is empty")
        self = super().__new__(cls, name)
        self.label, self.unit, self.low, self.high = label, unit, low, high
        self.better, self.about = better, about
        return self

    @property
    def name(self) -> str:
        return str(self)

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (worker processes, Dask) as itself
        return (_metric, (str(self), self.label, self.unit, self.low, self.high, self.better,
                          self.about))

    @property
    def direction(self) -> str:
        """``"lower is better"``, ``"higher is better"`` or ``""``."""
        return f"{self.better} is better" if self.better else ""

    @property
    def axis_label(self) -> str:
        """The label with its unit, as an axis shows it: ``"wire bytes up per agent (B)"``."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    @property
    def range_text(self) -> str:
        """The range as text: ``"[0, 1]"``, ``"≥ 0"``, ``"[-1, 1]"`` or ``""``."""
        if self.low is not None and self.high is not None:
            return f"[{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"≥ {self.low:g}"
        if self.high is not None:
            return f"≤ {self.high:g}"
        return ""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able description (the API's and the report's)."""
        return {"name": str(self), "label": self.label, "unit": self.unit, "low": self.low,
                "high": self.high, "better": self.better, "about": self.about}


def _metric(name: str, label: str, unit: str, low: float | None, high: float | None,
            better: str | None, about: str) -> Metric:
    return Metric(name, label, unit=unit, low=low, high=high, better=better, about=about)


def fraction(name: str, label: str, better: str | None, about: str = "") -> Metric:
    """A metric that is a share of something, in [0, 1]."""
    return Metric(name, label, low=0.0, high=1.0, better=better, about=about)


def plain(name: str) -> Metric:
    """What is known of a metric nobody described: its name as its label."""
    return Metric(name, name.replace("_", " "))


def describe(metrics: tuple[str, ...] | list[str], name: str) -> Metric:
    """The :class:`Metric` of ``name`` among ``metrics`` (a protocol's), else :func:`plain`."""
    for m in metrics:
        if m == name and isinstance(m, Metric):
            return m
    return plain(name)
