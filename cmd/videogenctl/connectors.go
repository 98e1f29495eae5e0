package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
	connectorspkg "github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/all"
)

// connectorRow says whether a payment connector can verify webhooks, never the secrets.
type connectorRow struct {
	Connector      string   `json:"connector"`
	Secrets        []string `json:"secrets"`
	SigningSecrets int      `json:"signingSecrets"`
	Ready          bool     `json:"ready"`
	Problem        string   `json:"problem,omitempty"`
}

func newConnectorsCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "connectors",
		Short: "Show, per payment connector, the Secrets that hold its webhook secrets (never the secrets)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return connectors(cmd.Context(), o)
		},
	}
}

// connectors shows, per connector, the Secrets that hold its webhook secrets.
func connectors(ctx context.Context, o *options) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(o.keyNamespace), client.HasLabels{connectorsecrets.LabelConnector}); err != nil {
		return err
	}
	var rows []connectorRow
	for _, conn := range all.Connectors() {
		row := connectorRow{Connector: conn.Name(), Secrets: []string{}}
		var unusable []string
		for _, s := range secrets.Items {
			if !strings.EqualFold(s.Labels[connectorsecrets.LabelConnector], conn.Name()) {
				continue
			}
			row.Secrets = append(row.Secrets, s.Name)
			for _, k := range []string{connectorsecrets.KeySecret, connectorsecrets.KeyAdditionalSecret} {
				value := strings.TrimSpace(string(s.Data[k]))
				if value == "" {
					continue
				}
				// A secret the connector skips (Adyen's, not hex) verifies nothing.
				if checker, ok := conn.(connectorspkg.SecretChecker); ok {
					if err := checker.CheckSecret([]byte(value)); err != nil {
						unusable = append(unusable, fmt.Sprintf("%s: %s: %v", s.Name, k, err))
						continue
					}
				}
				row.SigningSecrets++
			}
		}
		row.Ready = row.SigningSecrets > 0
		switch {
		case !row.Ready && len(unusable) > 0:
			row.Problem = fmt.Sprintf("no usable %s secret in namespace %s (%s): webhooks from %s get 401",
				conn.Name(), o.keyNamespace, strings.Join(unusable, "; "), conn.Name())
		case !row.Ready:
			row.Problem = fmt.Sprintf("no Secret labelled %s=%s with a %q key in namespace %s: webhooks from %s get 401",
				connectorsecrets.LabelConnector, conn.Name(), connectorsecrets.KeySecret, o.keyNamespace, conn.Name())
		}
		rows = append(rows, row)
	}
	if err := o.print(rows, func(w io.Writer) {
		fmt.Fprintln(w, "CONNECTOR\tREADY\tSECRETS\tSIGNING SECRETS")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%v\t%s\t%d\n", r.Connector, r.Ready, orDash(strings.Join(r.Secrets, ",")), r.SigningSecrets)
		}
	}); err != nil {
		return err
	}
	if len(secrets.Items) == 0 && (o.output == "" || o.output == "table") {
		// As apikey list's note, on stderr: a table of six "false" does not say it looked in
		// the wrong namespace (a typo in --key-namespace, or an operator installed elsewhere).
		where := fmt.Sprintf("found in namespace %q", o.keyNamespace)
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: o.keyNamespace}, &ns); apierrors.IsNotFound(err) {
			where = fmt.Sprintf("found: there is no namespace %q", o.keyNamespace)
		}
		fmt.Fprintf(stderr, "No connector Secrets %s; if the operator runs in another namespace, name it with --key-namespace.\n", where)
	}
	return nil
}
