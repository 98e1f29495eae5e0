package taskview

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

func TestCostAndChargeAreTheAdmittedPriceUntilTheControllerPricesTheTask(t *testing.T) {
	task := func(admitted string, phase videogenv1alpha1.TaskPhase, cost *int64) *videogenv1alpha1.VideoTask {
		vt := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Name: "vt-x"}}
		if admitted != "" {
			vt.Annotations = map[string]string{videogenv1alpha1.AnnotationAdmission: admitted + ":signature"}
		}
		vt.Status.Phase, vt.Status.Cost = phase, cost
		return vt
	}
	cases := map[string]struct {
		task   *videogenv1alpha1.VideoTask
		want   *int64
		charge string // "": none shown
	}{
		"just created: the admitted price, frozen":   {task("30", "", nil), ptr.To[int64](30), "Frozen"},
		"accepted: status.cost":                      {task("30", videogenv1alpha1.TaskQueued, ptr.To[int64](25)), ptr.To[int64](25), "Frozen"},
		"created with kubectl, not yet priced":       {task("", "", nil), nil, ""},
		"unreadable annotation":                      {task("thirty", "", nil), nil, ""},
		"ended before it was priced: never held any": {task("30", videogenv1alpha1.TaskFailed, nil), nil, ""},
	}
	for name, c := range cases {
		if c.task.Status.Phase == videogenv1alpha1.TaskQueued {
			c.task.Status.Charge = videogenv1alpha1.ChargeFrozen
		}
		v := Of(c.task)
		if got := v.Cost; (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: cost = %v, want %v", name, ptr.Deref(got, -1), ptr.Deref(c.want, -1))
		}
		if got := ptr.Deref(v.Charge, ""); got != c.charge {
			t.Errorf("%s: charge = %q, want %q", name, got, c.charge)
		}
	}
}

// The API shows where a completion webhook's delivery stands, as the VideoTask status records it.
func TestWebhookDeliveryIsShown(t *testing.T) {
	last := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	next := metav1.NewTime(last.Add(5 * time.Minute))
	vt := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Name: "vt-x"}}
	vt.Spec.WebhookURL = "https://hooks.example/done"
	vt.Status.Phase = videogenv1alpha1.TaskSucceeded
	vt.Status.Webhook = &videogenv1alpha1.WebhookDelivery{ID: "msg_1", State: videogenv1alpha1.WebhookPending,
		DeliveryAttempts: videogenv1alpha1.DeliveryAttempts{Attempts: 2, LastStatus: 503, LastError: "503 Service Unavailable", LastAttemptAt: &last, NextAttemptAt: &next}}

	raw, err := json.Marshal(Of(vt))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		WebhookURL string `json:"webhook_url"`
		Webhook    map[string]any
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "msg_1", "status": "pending", "attempts": 2.0, "last_status": 503.0,
		"last_error": "503 Service Unavailable", "next_attempt_at": "2026-11-23T12:05:00Z", "delivered_at": nil}
	if got.WebhookURL != "https://hooks.example/done" || !reflect.DeepEqual(got.Webhook, want) {
		t.Errorf("webhook_url %q, webhook %v; want %v", got.WebhookURL, got.Webhook, want)
	}

	delivered := metav1.NewTime(next.Add(time.Second))
	vt.Status.Webhook = &videogenv1alpha1.WebhookDelivery{ID: "msg_1", State: videogenv1alpha1.WebhookDelivered,
		DeliveryAttempts: videogenv1alpha1.DeliveryAttempts{Attempts: 3, LastStatus: 200, LastAttemptAt: &delivered, DeliveredAt: &delivered}}
	w := Of(vt).Webhook
	if w.Status != "delivered" || w.NextAttemptAt != nil || w.LastError != nil || !w.DeliveredAt.Equal(delivered.Time) || *w.LastStatus != 200 {
		t.Errorf("delivered webhook = %+v", w)
	}
}
