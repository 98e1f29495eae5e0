package main

import (
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// useLogger makes l the logger of controller-runtime and of client-go, which logs through
// klog (leader election, informers): in the manager's format, not as plain text beside it.
func useLogger(l logr.Logger) {
	ctrl.SetLogger(l)
	klog.SetLogger(l)
}
