package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// options are what every command shares: kubectl's connection flags, the operator's namespace
// and the output format.
type options struct {
	config       *genericclioptions.ConfigFlags
	keyNamespace string
	output       string
	out          io.Writer
	// flags are the root's persistent flags, to tell a --request-timeout given from its default.
	flags *pflag.FlagSet
}

// defaultRequestTimeout is --request-timeout's default: kubectl's, 0, waits forever for a
// cluster that takes the request and never answers (an overloaded kube-apiserver, a stuck
// proxy), and every command hung with it (tests shorten it).
var defaultRequestTimeout = 30 * time.Second

// client connects as kubectl would with the same flags: --kubeconfig, $KUBECONFIG or
// ~/.kube/config, --context, --as, --token, ...
func (o *options) client() (client.WithWatch, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
}

// watchClient is client for a watch's stream, which is open for as long as it follows tasks:
// the default --request-timeout would cut it (and every account's tasks be listed again each
// time); one the user gave bounds it, as kubectl's bounds kubectl get -w.
func (o *options) watchClient() (client.WithWatch, error) {
	return o.clientWithDefaultTimeout(0)
}

// completionTimeout bounds shell completion's requests when --request-timeout is not given: a
// TAB that waited the default 30s for a cluster that never answers hung the user's shell.
var completionTimeout = 3 * time.Second

// completionClient is client for shell completion, which gives up after completionTimeout (or
// the --request-timeout the user gave) and then offers no names.
func (o *options) completionClient() (client.WithWatch, error) {
	return o.clientWithDefaultTimeout(completionTimeout)
}

// clientWithDefaultTimeout is client with d in place of --request-timeout's default; one the
// user gave is kept.
func (o *options) clientWithDefaultTimeout(d time.Duration) (client.WithWatch, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	if !o.flags.Changed("request-timeout") {
		cfg.Timeout = d
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
}

// namespace is --namespace, or the kubeconfig context's namespace; explicit says whether the
// user chose one (commands that span accounts use all of them otherwise).
func (o *options) namespace() (ns string, explicit bool, err error) {
	ns, explicit, err = o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", false, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return ns, explicit, nil
}

// checkViewFormat refuses an -o that print cannot write. A command that changes something
// calls it first: one that failed only to print what it did (a credit applied, a key issued)
// would exit 1 and look as if it did nothing.
func (o *options) checkViewFormat() error {
	_, err := o.viewPrinter()
	return err
}

// viewPrinter is the printer of -o for a view (not a Kubernetes object): kubectl's JSON, YAML,
// KYAML, jsonpath and go-template printers, as the task commands take them; nil for the table.
// Only name is the task commands' alone: a view is no object and has no name.
func (o *options) viewPrinter() (printers.ResourcePrinter, error) {
	switch o.output {
	case "", "table":
		return nil, nil
	case "json":
		return &printers.JSONPrinter{}, nil
	case "yaml":
		return &printers.YAMLPrinter{}, nil
	case "kyaml":
		return &printers.KYAMLPrinter{}, nil
	}
	flags := genericclioptions.NewPrintFlags("")
	p, err := flags.TemplatePrinterFlags.ToPrinter(o.output)
	switch {
	case err == nil:
		return o.intsAsIntegers(p), nil
	case !genericclioptions.IsNoCompatiblePrinterError(err):
		return nil, fmt.Errorf("-o %s: %w", o.output, err) // a template that does not parse
	case o.output == "name":
		return nil, fmt.Errorf("unknown output format %q for this command (it prints no object, so no name; the task commands take it): use %s", o.output, viewFormats)
	}
	return nil, fmt.Errorf("unknown output format %q: use %s", o.output, viewFormats)
}

// viewFormats are the -o values of every command; the task commands also take name.
const viewFormats = "table, json, yaml, kyaml, jsonpath=…, jsonpath-as-json=…, jsonpath-file=…, go-template=…, go-template-file=…, template=…, templatefile=…"

// print writes a view (not a Kubernetes object) in the -o format, or calls table for the
// default format.
func (o *options) print(v any, table func(w io.Writer)) error {
	p, err := o.viewPrinter()
	if err != nil {
		return err
	}
	if p == nil {
		tw := printers.GetNewTabWriter(o.out)
		table(tw)
		return tw.Flush()
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	raw = escapeRawJSON(raw)
	// As raw JSON a view prints through kubectl's printers, as the task commands' objects do.
	if _, ok := p.(*printers.YAMLPrinter); ok {
		return printYAML(p, raw, o.out)
	}
	if _, ok := p.(*printers.GoTemplatePrinter); ok && bytes.HasPrefix(raw, []byte("[")) {
		return o.printListWithGoTemplate(raw)
	}
	return p.PrintObj(&runtime.Unknown{Raw: raw}, o.out)
}

// printListWithGoTemplate prints a view that is a list (apikey list, connectors) with -o
// go-template=…: kubectl's go-template printer reads the JSON it is given into a map, and
// refused a list ("json: cannot unmarshal array into Go value of type map[string]interface
// {}"), as jsonpath=… takes it. The template is run on the list as dot: kubectl's printer is
// given {"items": [list]} and the template inside {{range .items}}…{{end}}, which runs it once
// with dot the list, empty or not (the range is over the one-element wrapper); only $ is the
// wrapper, not the list.
func (o *options) printListWithGoTemplate(raw []byte) error {
	var text string
	for _, format := range []string{"go-template=", "template=", "go-template-file=", "templatefile="} {
		value, ok := strings.CutPrefix(o.output, format)
		if !ok {
			continue
		}
		text = value
		if strings.HasSuffix(format, "file=") {
			data, err := os.ReadFile(value)
			if err != nil {
				return fmt.Errorf("-o %s: %w", o.output, err)
			}
			text = string(data)
		}
		break
	}
	p, err := printers.NewGoTemplatePrinter([]byte("{{range .items}}" + text + "{{end}}"))
	if err != nil {
		return fmt.Errorf("-o %s: for a list, the template is run inside {{range}}, where it cannot {{define}} templates: %w", o.output, err)
	}
	p.AllowMissingKeys(true) // as kubectl's default
	return p.PrintObj(&runtime.Unknown{Raw: slices.Concat([]byte(`{"items":[`), raw, []byte(`]}`))}, o.out)
}

// objectPrinter prints VideoTasks as kubectl prints objects (json, yaml, name, jsonpath=…,
// go-template=…); table is nil for the default format, which the caller draws.
func (o *options) objectPrinter() (printers.ResourcePrinter, error) {
	if o.output == "" || o.output == "table" {
		return nil, nil
	}
	flags := genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.New())
	flags.OutputFormat = &o.output
	// json, yaml and kyaml: as kubectl's, but through escapeRawJSON (see escapedJSONPrinter).
	if p, err := flags.JSONYamlPrintFlags.ToPrinter(o.output); err == nil {
		if omit, ok := p.(*printers.OmitManagedFieldsPrinter); ok {
			omit.Delegate = &escapedJSONPrinter{delegate: omit.Delegate}
			return flags.TypeSetterPrinter.ToPrinter(omit), nil
		}
	}
	// jsonpath=…: as kubectl's, but with its integers as integers (see jsonPathPrinter).
	if p, err := flags.TemplatePrinterFlags.ToPrinter(o.output); err == nil {
		if jp, ok := o.intsAsIntegers(p).(*jsonPathPrinter); ok {
			return flags.TypeSetterPrinter.ToPrinter(jp), nil
		}
	}
	p, err := flags.ToPrinter()
	if err != nil && !genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("-o %s: %w", o.output, err) // a template that does not parse
	}
	if err != nil {
		return nil, fmt.Errorf("unknown output format %q: use table, %s", o.output, strings.Join(flags.AllowedFormats(), ", "))
	}
	return p, nil
}

// intsAsIntegers is p, kubectl's printer of a template format, but for jsonpath=… (and
// jsonpath-file=…, jsonpath-as-json=…) jsonPathPrinter around it.
func (o *options) intsAsIntegers(p printers.ResourcePrinter) printers.ResourcePrinter {
	if jp, ok := p.(*printers.JSONPathPrinter); ok {
		return &jsonPathPrinter{delegate: jp, format: o.output}
	}
	return p
}

// jsonPathPrinter is kubectl's jsonpath printer given the object's JSON read with its integers
// as int64: kubectl's reads the JSON of any object that is not Unstructured (ours: a view, a
// VideoTask) with encoding/json, whose numbers are float64, and prints a balance of 1000000 as
// 1e+06 and 1500000 as 1.5e+06 (kubectl's own objects are Unstructured, read with int64s, as
// its go-template printer reads any JSON). Beyond 2^53 a float64 also loses the number.
type jsonPathPrinter struct {
	delegate *printers.JSONPathPrinter
	format   string // -o, for the error
}

func (p *jsonPathPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var data any
	if err := utiljson.Unmarshal(raw, &data); err != nil {
		return err
	}
	if err := p.delegate.JSONPath.Execute(w, data); err != nil {
		return fmt.Errorf("-o %s: %w", p.format, err)
	}
	return nil
}

// escapedJSONPrinter prints an object as its JSON through escapeRawJSON: a task's messages and
// URLs are a backend's text, and kubectl's YAML printers refuse a C1 control in them ("yaml:
// control characters are not allowed": task get -o yaml failed, task list -o yaml for the
// whole listing) while its JSON printer writes it raw; and its YAML printer writes U+202E and
// the other format characters raw (see printYAML). The delegate (kubectl's JSON, YAML or
// KYAML printer) prints the escaped JSON as it prints any object.
type escapedJSONPrinter struct {
	delegate printers.ResourcePrinter
}

func (p *escapedJSONPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if _, ok := p.delegate.(*printers.YAMLPrinter); ok {
		return printYAML(p.delegate, escapeRawJSON(raw), w) // KYAML escapes such characters itself
	}
	return p.delegate.PrintObj(&runtime.Unknown{Raw: escapeRawJSON(raw)}, w)
}

// completeAccounts completes account names: the namespaces that hold a PointAccount.
func (o *options) completeAccounts(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	c, err := o.completionClient()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var list videogenv1alpha1.PointAccountList
	if err := c.List(cmd.Context(), &list); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, a := range list.Items {
		names = append(names, a.Namespace)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
