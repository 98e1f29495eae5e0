package testenv

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RemoveNamespace deletes namespace name for good, as a cluster's namespace controller does once
// the namespace is empty: envtest runs none, so a deleted namespace would stay Terminating. It
// deletes the namespace (unless it is being deleted already), takes its finalizers off through
// /finalize and waits until it is gone.
func RemoveNamespace(ctx context.Context, c client.Client, name string) error {
	key := client.ObjectKey{Name: name}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, key, ns); err != nil {
		return err
	}
	if ns.DeletionTimestamp.IsZero() {
		if err := c.Delete(ctx, ns); err != nil {
			return err
		}
		if err := c.Get(ctx, key, ns); err != nil {
			return err
		}
	}
	ns.Spec.Finalizers = nil
	if err := c.SubResource("finalize").Update(ctx, ns); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
