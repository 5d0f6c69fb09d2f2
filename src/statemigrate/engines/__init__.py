"""Engine modules: one reader and writer per storage engine (see ``base``)."""
