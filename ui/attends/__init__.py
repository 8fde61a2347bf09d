"""The "Why a head attends there" page's views: its controls (inputs), cached readings (data),
figures, and sections (the cause, the frequencies, the whole pattern, the question)."""
