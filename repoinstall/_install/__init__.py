"""Making a tree exist: the protocol, staging, the no-replace publish, single-flight, and the installers."""
