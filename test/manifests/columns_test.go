package manifests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// `kubectl get paymentevents -o wide` tells an event no sink takes (NoSinks: nothing to do) from
// one a sink was given up for (DeliveryFailed: redeliver once the sink is fixed). Both are
// Forwarded=False; the rows are rendered by the apiserver's own table convertor from the CRD's
// printer columns, as kubectl receives them.
func TestPaymentEventWideRowsTellNoSinksFromAFailedSink(t *testing.T) {
	row := func(reason, message string) []any {
		t.Helper()
		return tableRow(t, "videogen.dev_paymentevents.yaml", &videogenv1alpha1.PaymentEvent{
			TypeMeta:   metav1.TypeMeta{APIVersion: videogenv1alpha1.GroupVersion.String(), Kind: "PaymentEvent"},
			ObjectMeta: metav1.ObjectMeta{Name: "stripe-0123", Namespace: "videogen-system"},
			Spec:       videogenv1alpha1.PaymentEventSpec{Connector: "stripe", EventType: "DISPUTE_CREATED", Currency: "USD"},
			Status: videogenv1alpha1.PaymentEventStatus{Conditions: []metav1.Condition{
				{Type: videogenv1alpha1.ConditionProcessed, Status: metav1.ConditionTrue, Reason: videogenv1alpha1.ReasonEventRecorded},
				{Type: videogenv1alpha1.ConditionForwarded, Status: metav1.ConditionFalse, Reason: reason, Message: message},
			}},
		}).Cells
	}
	noSinks := row(videogenv1alpha1.ReasonNoSinks, "no configured sink accepts this event")
	failed := row(videogenv1alpha1.ReasonSinkFailed, "1 of 1 sink(s) not delivered; sink billing: gave up after 12 attempts: 503")
	if fmt.Sprint(noSinks) == fmt.Sprint(failed) {
		t.Errorf("-o wide shows NoSinks and DeliveryFailed alike: %v", noSinks)
	}
	cell := func(cells []any, want string) bool {
		for _, c := range cells {
			if c == want {
				return true
			}
		}
		return false
	}
	if !cell(noSinks, videogenv1alpha1.ReasonNoSinks) || !cell(failed, videogenv1alpha1.ReasonSinkFailed) {
		t.Errorf("-o wide does not name the Forwarded reason: %v and %v", noSinks, failed)
	}
}

// `kubectl get videotasks -o wide` shows a task waiting out a backend outage: its phase is only
// Queued or Running, and the Reason column speaks of failures, so on-call could not see it without
// -o yaml.
func TestVideoTaskWideRowsShowABackendOutage(t *testing.T) {
	task := &videogenv1alpha1.VideoTask{
		TypeMeta:   metav1.TypeMeta{APIVersion: videogenv1alpha1.GroupVersion.String(), Kind: "VideoTask"},
		ObjectMeta: metav1.ObjectMeta{Name: "vt-1", Namespace: "team-a"},
		Spec:       videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: "t1"},
		Status: videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskQueued, Conditions: []metav1.Condition{
			{Type: videogenv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: "PointsFrozen"},
			{Type: videogenv1alpha1.ConditionDispatched, Status: metav1.ConditionFalse, Reason: videogenv1alpha1.ReasonBackendUnavailable},
		}},
	}
	columns := printerColumns(t, "videogen.dev_videotasks.yaml")
	row := tableRow(t, "videogen.dev_videotasks.yaml", task)
	for i, c := range row.Cells {
		if c == videogenv1alpha1.ReasonBackendUnavailable {
			if columns[i-1].Priority == 0 { // the first cell is the name
				t.Errorf("column %q shows the outage in the narrow table too", columns[i-1].Name)
			}
			return
		}
	}
	t.Errorf("-o wide does not show the outage: %v", row.Cells)
}

// `kubectl get templates` shows what a task costs for every template, the default-priced and
// adjustable ones too (their spec has no price), from the status the template controller
// writes.
func TestTemplateRowsShowThePrice(t *testing.T) {
	tmpl := &videogenv1alpha1.Template{
		TypeMeta:   metav1.TypeMeta{APIVersion: videogenv1alpha1.GroupVersion.String(), Kind: "Template"},
		ObjectMeta: metav1.ObjectMeta{Name: "demo-countdown"},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityTemplate, DisplayName: "Countdown",
			DurationAdjustable: true},
		Status: videogenv1alpha1.TemplateStatus{Price: "5s=20, others 10 (default)"},
	}
	columns := printerColumns(t, "videogen.dev_templates.yaml")
	row := tableRow(t, "videogen.dev_templates.yaml", tmpl)
	for i, c := range columns {
		if c.Name == "Price" {
			if row.Cells[i+1] != tmpl.Status.Price || c.Priority != 0 { // the first cell is the name
				t.Errorf("Price column shows %v (priority %d), want %q in the narrow table", row.Cells[i+1], c.Priority, tmpl.Status.Price)
			}
			return
		}
	}
	t.Errorf("no Price column: %+v", columns)
}

// tableRow is obj's row in the table the kube-apiserver renders from the printer columns of the
// CRD in config/crd/bases/file, as kubectl receives it.
func tableRow(t *testing.T, file string, obj runtime.Object) metav1.TableRow {
	t.Helper()
	convertor, err := tableconvertor.New(printerColumns(t, file))
	if err != nil {
		t.Fatal(err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	table, err := convertor.ConvertToTable(context.Background(), &unstructured.Unstructured{Object: content}, nil)
	if err != nil || len(table.Rows) != 1 {
		t.Fatalf("table = %+v, %v", table, err)
	}
	return table.Rows[0]
}

// printerColumns are the additional printer columns of the CRD in config/crd/bases/file.
func printerColumns(t *testing.T, file string) []apiextensionsv1.CustomResourceColumnDefinition {
	t.Helper()
	crd := baseCRD(t, file)
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%s: %d versions, want 1", file, len(crd.Spec.Versions))
	}
	return crd.Spec.Versions[0].AdditionalPrinterColumns
}

// baseCRD is the CRD in config/crd/bases/file, as make manifests generated it.
func baseCRD(t *testing.T, file string) apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return crd
}

// baseCRDs are every CRD in config/crd/bases.
func baseCRDs(t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs: %v", err)
	}
	crds := make([]apiextensionsv1.CustomResourceDefinition, 0, len(paths))
	for _, path := range paths {
		crds = append(crds, baseCRD(t, filepath.Base(path)))
	}
	return crds
}
