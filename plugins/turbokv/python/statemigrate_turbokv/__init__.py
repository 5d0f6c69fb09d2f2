"""TurboKV 0.6 stores for statemigrate: the ``turbokv`` engine (:mod:`.engine`)."""
