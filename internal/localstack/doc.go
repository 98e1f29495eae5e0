// Package localstack runs the whole service on one machine for `make run` and the local-mode
// end-to-end tests: a control plane built from Go modules (etcd and kube-apiserver, as envtest
// runs them, with etcd's data kept between runs), the CRDs, and the manager, the REST apiserver
// and the reference worker as separate processes, seeded with demo templates, an account with
// points and an API key.
package localstack
