package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apikeys"
)

func apiKeyCreate(ctx context.Context, args []string, out io.Writer) error {
	var g globals
	var account, description string
	fs := flag.NewFlagSet("apikey create", flag.ContinueOnError)
	g.bind(fs)
	fs.StringVar(&account, "account", "", "account (namespace) the key acts for")
	fs.StringVar(&description, "description", "", "what the key is for")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if account == "" {
		return fmt.Errorf("usage: videogenctl apikey create --account NAME [--description TEXT]")
	}
	c, err := g.kubeClient()
	if err != nil {
		return err
	}
	// Refuse keys for accounts that do not exist: such a key could only ever answer errors.
	if err := c.Get(ctx, client.ObjectKey{Namespace: account, Name: videogenv1alpha1.PointAccountName}, &videogenv1alpha1.PointAccount{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no account %q: create it first with videogenctl account create %s", account, account)
		}
		return err
	}
	key, info, err := apikeys.Issue(ctx, c, g.keyNamespace, account, description)
	if err != nil {
		return err
	}
	view := map[string]string{"id": info.ID, "account": account, "key": key}
	return g.print(out, view, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "API key %s for account %q (shown once; store it now):\n\n  %s\n\nRevoke with: videogenctl apikey revoke %s\n",
			info.ID, account, key, info.ID)
	})
}

func apiKeyList(ctx context.Context, args []string, out io.Writer) error {
	var g globals
	var account string
	fs := flag.NewFlagSet("apikey list", flag.ContinueOnError)
	g.bind(fs)
	fs.StringVar(&account, "account", "", "only this account's keys")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	c, err := g.kubeClient()
	if err != nil {
		return err
	}
	keys, err := apikeys.List(ctx, c, g.keyNamespace, account)
	if err != nil {
		return err
	}
	return g.print(out, keys, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "ID\tACCOUNT\tCREATED\tDESCRIPTION")
		for _, k := range keys {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.ID, k.Account, k.CreatedAt.Format(time.RFC3339), k.Description)
		}
	})
}

func apiKeyRevoke(ctx context.Context, args []string, out io.Writer) error {
	var g globals
	fs := flag.NewFlagSet("apikey revoke", flag.ContinueOnError)
	g.bind(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: videogenctl apikey revoke ID")
	}
	c, err := g.kubeClient()
	if err != nil {
		return err
	}
	if err := apikeys.Revoke(ctx, c, g.keyNamespace, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(out, "API key %s revoked; requests with it are refused within seconds\n", pos[0])
	return nil
}
