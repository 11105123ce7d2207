"""Per-language fairness reports (HTML, Markdown, CSV, summary.json)."""
