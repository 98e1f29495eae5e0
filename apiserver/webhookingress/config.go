package webhookingress

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
	"github.com/videogen-dev/videogen-operator/internal/connectors/authorizenet"
	"github.com/videogen-dev/videogen-operator/internal/connectors/checkout"
	"github.com/videogen-dev/videogen-operator/internal/connectors/razorpay"
	"github.com/videogen-dev/videogen-operator/internal/connectors/square"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
)

// Config is what a server needs to run the ingress, settable by flags.
type Config struct {
	// Namespace holds the PaymentEvents and the connector Secrets.
	Namespace    string
	MaxBodyBytes int64
	// SquareNotificationURL is the URL Square signs (its subscription's notification URL);
	// needed whenever the ingress sits behind a proxy or a different host name.
	SquareNotificationURL string
	// AuthorizeNetCurrency is the currency of Authorize.net amounts (its payloads carry none).
	AuthorizeNetCurrency string
	// Logger receives the ingress's and the Event Service's log lines; not a flag: the server
	// passes its own logger, so they share its format (nil: slog.Default()).
	Logger *slog.Logger
}

// BindFlags registers the ingress flags on fs.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Namespace, "webhook-namespace", c.Namespace,
		"Namespace of the PaymentEvents and of the connector Secrets (labelled "+connectorsecrets.LabelConnector+"); $POD_NAMESPACE, the pod's namespace, when set (as cmd/apiserver reads it).")
	fs.Int64Var(&c.MaxBodyBytes, "webhook-max-body-bytes", DefaultMaxBodyBytes, "Largest webhook body accepted; larger ones get 413.")
	fs.StringVar(&c.SquareNotificationURL, "square-notification-url", c.SquareNotificationURL,
		"Notification URL of the Square webhook subscription, which Square signs (default: the URL of the request).")
	fs.StringVar(&c.AuthorizeNetCurrency, "authorizenet-currency", c.AuthorizeNetCurrency,
		"ISO currency of Authorize.net amounts, which its webhooks do not carry.")
}

// Registry returns every connector, configured by c.
func (c Config) Registry() (*connectors.Registry, error) {
	var squareOpts []square.Option
	if c.SquareNotificationURL != "" {
		squareOpts = append(squareOpts, square.WithNotificationURL(c.SquareNotificationURL))
	}
	var anetOpts []authorizenet.Option
	if c.AuthorizeNetCurrency != "" {
		anetOpts = append(anetOpts, authorizenet.WithCurrency(c.AuthorizeNetCurrency))
	}
	return connectors.NewRegistry(adyen.New(), authorizenet.New(anetOpts...), checkout.New(),
		razorpay.New(), square.New(squareOpts...), stripe.New())
}

// Setup builds the whole ingress: a Secret cache on cfg for c.Namespace (running until ctx
// ends), the configured connectors, the Event Service, metrics on reg (may be nil) and the
// Handler storing with cl, both logging to c.Logger. Mount the result with Register.
func Setup(ctx context.Context, cfg *rest.Config, cl client.Client, c Config, reg prometheus.Registerer) (*Handler, error) {
	if c.Namespace == "" {
		return nil, fmt.Errorf("webhookingress: --webhook-namespace is required")
	}
	secrets, err := connectorsecrets.Start(ctx, cfg, c.Namespace)
	if err != nil {
		return nil, err
	}
	registry, err := c.Registry()
	if err != nil {
		return nil, err
	}
	svc, err := eventservice.New(secrets, eventservice.WithRegistry(registry), eventservice.WithLogger(c.Logger))
	if err != nil {
		return nil, err
	}
	metrics, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return New(Options{Service: svc, Client: cl, Namespace: c.Namespace, Connectors: registry,
		MaxBodyBytes: c.MaxBodyBytes, Metrics: metrics, Logger: c.Logger})
}
