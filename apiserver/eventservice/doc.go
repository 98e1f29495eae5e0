// Package eventservice serves EventService.Handle (api/proto/videogen/events/v1):
// it verifies and normalizes payment webhooks with the connectors package.
//
// [NewHandler] mounts the service on one http.Handler that answers gRPC,
// gRPC-Web and Connect (binary and JSON), behind [TokenAuth]. In-process
// callers such as the HTTP webhook ingress use [Service.HandleWebhook]
// directly and map its errors with [ErrorCode].
package eventservice
