//! No library: this package holds the drivers' tests against real servers
//! (`tests/`), with the test support of pool-core's own tests.
