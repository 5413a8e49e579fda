"""What a run is asked to do: the configuration file, the settings and their bounds, the files discovered,
and the selection of rules."""
