"""A small corpus with distinct topics, shared entities across documents and metadata to filter on."""

from __future__ import annotations

from knowledge.dto import DocumentInput

DOCS = [
    DocumentInput(
        title="Lovelace",
        text=(
            "Ada Lovelace worked with Charles Babbage on the Analytical Engine. She published the first "
            "algorithm intended for the Analytical Engine and saw that it could do more than arithmetic."
        ),
        source_path="history/computing/lovelace.md",
        metadata={"lang": "en", "year": 1843},
    ),
    DocumentInput(
        title="Babbage",
        text=(
            "Charles Babbage designed the Difference Engine and later the Analytical Engine, a mechanical "
            "general-purpose computer with a mill and a store."
        ),
        source_path="history/computing/babbage.md",
        metadata={"lang": "en", "year": 1837},
    ),
    DocumentInput(
        title="Sourdough",
        text=(
            "Sourdough bread rises with a starter of wild yeast and lactic acid bacteria. Bakers feed the "
            "starter with flour and water and let the dough ferment slowly overnight."
        ),
        source_path="kitchen/bread/sourdough.md",
        metadata={"lang": "en", "year": 2020},
    ),
    DocumentInput(
        title="Glaciers",
        text=(
            "Glaciers form where snow accumulates faster than it melts. The ice flows downhill under its own "
            "weight and carves valleys, leaving moraines when it retreats."
        ),
        source_path="science/earth/glaciers.md",
        metadata={"lang": "en", "year": 2019},
    ),
    DocumentInput(
        title="Gletscher",
        text=(
            "Gletscher entstehen, wo mehr Schnee fällt als schmilzt. Das Eis fliesst talwärts und formt "
            "Täler und Moränen."
        ),
        source_path="science/earth/gletscher.md",
        metadata={"lang": "de", "year": 2019},
    ),
    DocumentInput(
        title="Volcanoes",
        text=(
            "Volcanoes erupt when magma rises through the crust. Basalt lava flows are fluid, while andesite "
            "eruptions are explosive and build steep cones."
        ),
        source_path="science/earth/volcanoes.md",
        metadata={"lang": "en", "year": 2018},
    ),
]

# One long document: several chunks with NEXT_CHUNK links (chunk size is lowered by the tests).
LONG = DocumentInput(
    title="Telescope history",
    text=" ".join(
        f"Part {i}: the telescope of year {1600 + i * 10} improved lenses, mirrors and mounts for astronomers."
        for i in range(40)
    ),
    source_path="science/space/telescopes.md",
    metadata={"lang": "en", "year": 1608},
)
