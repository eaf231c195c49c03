// Package check holds the tests of Grove's deployment files: the container
// build file (deploy/container/Dockerfile) and every Kubernetes manifest
// under deploy/kubernetes, the cluster example included. It is a module of
// its own so that the Kubernetes API types, the Prometheus Operator's types
// and Prometheus's rule parser stay out of Grove's go.mod; `make test` runs
// it (make test-deploy). It owns no state: its tests read the files, parse
// them with the tools that will read them in production, and start the real
// grove binary to check that the probes and the alert rules name what the
// server serves and exports.
package check
