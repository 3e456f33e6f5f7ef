"""Many hosts at once: merging per-host reports (`merge`), and gathering them from a Ray cluster (`ray_fleet`,
the only module that imports Ray)."""
