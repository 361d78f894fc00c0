"""What a load did, per table: rows read, accepted and quarantined by reason."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class TableReport:
    table: str
    source: str  # file relative to the dataset folder, or "implicit"
    read: int
    accepted: int
    quarantined_by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def quarantined(self) -> int:
        return sum(self.quarantined_by_reason.values())

    @property
    def reconciles(self) -> bool:
        """Nothing was lost: every row read is either accepted or quarantined."""
        return self.read == self.accepted + self.quarantined


@dataclass
class LoadReport:
    dataset: str
    database: Path
    tables: dict[str, TableReport]
    # batch -> why: batches of incoming/ left out whole, their files kept where they are
    refused_batches: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "database": str(self.database),
            "tables": {
                name: {**asdict(report), "quarantined": report.quarantined}
                for name, report in self.tables.items()
            },
            "refused_batches": self.refused_batches,
        }

    @classmethod
    def from_dict(cls, saved: dict) -> LoadReport:
        """The report `to_dict` wrote."""
        tables = {
            name: TableReport(
                t["table"], t["source"], t["read"], t["accepted"], t["quarantined_by_reason"]
            )
            for name, t in saved["tables"].items()
        }
        refused = saved.get("refused_batches", {})  # absent from reports written before
        return cls(saved["dataset"], Path(saved["database"]), tables, refused)

    def to_markdown(self) -> str:
        lines = [
            "| table | source | read | accepted | quarantined | reasons |",
            "|---|---|---:|---:|---:|---|",
        ]
        for report in self.tables.values():
            reasons = ", ".join(
                f"{code}: {count}" for code, count in sorted(report.quarantined_by_reason.items())
            )
            lines.append(
                f"| {report.table} | {report.source} | {report.read:,} | {report.accepted:,}"
                f" | {report.quarantined:,} | {reasons or '-'} |"
            )
        lines += [
            f"\nBatch `{batch}` refused whole: {why}" for batch, why in self.refused_batches.items()
        ]
        return "\n".join(lines)
