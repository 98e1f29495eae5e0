package main

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func namespace(m *metav1.ObjectMeta) *corev1.Namespace { return &corev1.Namespace{ObjectMeta: *m} }
