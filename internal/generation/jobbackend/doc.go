// Package jobbackend runs each generation stage as a Kubernetes batch/v1 Job built from a pod
// template per capability. Inputs reach the containers as VIDEOGEN_* env vars (and optionally as
// flags); the result comes back as JSON in the result container's termination message. A failed
// or timed-out Job fails the stage, and cancelling deletes the Job. docs/job-backend.md is the
// contract for container authors and operators.
package jobbackend
