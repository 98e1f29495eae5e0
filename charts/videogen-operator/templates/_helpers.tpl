{{/* Prefix of every object name; config/default's namePrefix is "videogen-". */}}
{{- define "videogen.prefix" -}}
{{- .Values.fullnameOverride | default "videogen" | trunc 40 | trimSuffix "-" -}}
{{- end }}

{{/* Labels of every object; app.kubernetes.io/name is added per component. */}}
{{- define "videogen.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/part-of: videogen-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "videogen.operatorLabels" -}}
{{ include "videogen.labels" . }}
app.kubernetes.io/name: videogen-operator
{{- end }}

{{- define "videogen.workerLabels" -}}
{{ include "videogen.labels" . }}
app.kubernetes.io/name: videogen-worker
{{- end }}

{{/* The manager pods (manager and apiserver containers). */}}
{{- define "videogen.managerSelector" -}}
control-plane: controller-manager
app.kubernetes.io/name: videogen-operator
{{- end }}

{{- define "videogen.workerSelector" -}}
app.kubernetes.io/name: videogen-worker
{{- end }}

{{- define "videogen.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "videogen.workerImage" -}}
{{ .Values.worker.image.repository }}:{{ .Values.worker.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* A whole number as a flag's value: a values file's numbers are float64, which print as
1e+06 from a million on and which Go's flag package refuses. Strings pass as they are. */}}
{{- define "videogen.integer" -}}
{{- if kindIs "float64" .value -}}
{{- if ne .value (float64 (int64 .value)) -}}
{{- fail (printf "%s must be a whole number, not %v" .name .value) -}}
{{- end -}}
{{- int64 .value -}}
{{- else -}}
{{- .value -}}
{{- end -}}
{{- end }}

{{/* Cluster DNS base of a Service of this release: http://<prefix>-<name>.<namespace>.svc */}}
{{- define "videogen.serviceURL" -}}
http://{{ include "videogen.prefix" .root }}-{{ .name }}.{{ .root.Release.Namespace }}.svc
{{- end }}

{{- define "videogen.apiserverPublicURL" -}}
{{ .Values.apiserver.publicURL | default (include "videogen.serviceURL" (dict "root" . "name" "api")) }}
{{- end }}

{{- define "videogen.workerPublicURL" -}}
{{ .Values.worker.publicURL | default (printf "%s:8080" (include "videogen.serviceURL" (dict "root" . "name" "worker"))) }}
{{- end }}

{{/* Fails on a flag of args (-x or --x, with =value or not) that flags names: a flag the chart
sets itself and that other objects follow, which a later copy in extraArgs would leave behind.
Arguments: where (the value's name), args, flags (flag name: what to do instead). */}}
{{- define "videogen.refuseFlags" -}}
{{- range .args }}
{{- $a := toString . }}
{{- if hasPrefix "-" $a }}
{{- $name := regexReplaceAll "^--?([^=]*).*$" $a "${1}" }}
{{- if hasKey $.flags $name }}
{{- fail (printf "--%s in %s: %s" $name $.where (get $.flags $name)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The apiserver's blob store: the last --blob-store of apiserver.extraArgs (Go's flag package
takes -x or --x, =value or the next argument), dir without one. */}}
{{- define "videogen.apiserverBlobStore" -}}
{{- $args := .Values.apiserver.extraArgs }}
{{- $kind := "dir" }}
{{- range $i, $a := $args }}
{{- $a = toString $a }}
{{- if regexMatch "^--?blob-store=" $a }}
{{- $kind = regexReplaceAll "^--?blob-store=" $a "" }}
{{- else if and (regexMatch "^--?blob-store$" $a) (lt (add1 $i) (len $args)) }}
{{- $kind = toString (index $args (add1 $i)) }}
{{- end }}
{{- end }}
{{- $kind -}}
{{- end }}

{{/* defaultPrice as the manager and the apiserver take it: a whole number of points from 0 to
1000000000 (pricing.CheckDefault). Anything else would render, and both containers would exit
on it at start (crash-looping), or not parse it at all. */}}
{{- define "videogen.defaultPrice" -}}
{{- $p := include "videogen.integer" (dict "name" "defaultPrice" "value" .Values.defaultPrice) }}
{{- if or (not (regexMatch "^[0-9]{1,10}$" $p)) (gt ($p | int64) 1000000000) }}
{{- fail (printf "defaultPrice must be a whole number of points from 0 to 1000000000 (as a template's price), not %s" $p) }}
{{- end }}
{{- $p -}}
{{- end }}

{{/* manager.replicas as a whole number (0 is a pause: NOTES.txt says what stops); fails on
anything else, which int64 would quietly read as 0 or 1. */}}
{{- define "videogen.managerReplicas" -}}
{{- $n := include "videogen.integer" (dict "name" "manager.replicas" "value" .Values.manager.replicas) }}
{{- if not (regexMatch "^[0-9]+$" $n) }}
{{- fail (printf "manager.replicas must be a whole number, 0 or more, not %s" $n) }}
{{- end }}
{{- $n -}}
{{- end }}

{{- define "videogen.webhookNamespace" -}}
{{ .Values.apiserver.webhookNamespace | default .Release.Namespace }}
{{- end }}

{{/* The manager's --backends-config file. */}}
{{- define "videogen.backends" -}}
{{- if .Values.backends }}
{{- toYaml (dict "backends" .Values.backends) }}
{{- else if .Values.worker.enabled }}
backends:
- name: reference-worker
  capabilities: [video.short, video.eraser, video.template, image.pose]
  http:
    # The worker Service of this release.
    url: {{ include "videogen.serviceURL" (dict "root" . "name" "worker") }}:8080
    # The worker's bearer token, from the {{ include "videogen.prefix" . }}-worker-token Secret (docs/deploy.md).
    tokenFile: /etc/videogen/worker/token
    requestTimeout: 15s
{{- else }}
{{- fail "worker.enabled is false and backends is empty: no backend would serve any capability" }}
{{- end }}
{{- end }}

{{/* "true" when a backend of the manager sends the worker token (a tokenFile in the
<prefix>-worker-token Secret's mount): the reference worker's entry, by default. Otherwise the
manager does not mount that Secret, and its pod does not wait for one nothing reads. */}}
{{- define "videogen.managerUsesWorkerToken" -}}
{{- $uses := and (not .Values.backends) .Values.worker.enabled }}
{{- range .Values.backends }}
{{- if and .http (hasPrefix "/etc/videogen/worker/" (toString .http.tokenFile)) }}
{{- $uses = true }}
{{- end }}
{{- end }}
{{- if $uses }}true{{ end }}
{{- end }}

{{/* "true" when path is in a volume of manager.extraVolumeMounts. Arguments: root, path. */}}
{{- define "videogen.inExtraMount" -}}
{{- range .root.Values.manager.extraVolumeMounts }}
{{- if hasPrefix (printf "%s/" (trimSuffix "/" (toString .mountPath))) $.path }}true{{ end }}
{{- end }}
{{- end }}

{{/* The backends ConfigMap's data: backends.yaml and the Job backend configs of jobConfigs,
each a file of its own (a map as YAML, a string, e.g. from --set-file, as it is). Fails on a
backend whose job.configFile or http.tokenFile the manager does not mount: it would stop at
start. */}}
{{- define "videogen.backendsData" -}}
{{- $dir := "/etc/videogen/backends/" }}
{{- $extra := "or mount it with manager.extraVolumes and manager.extraVolumeMounts" }}
{{- if hasKey .Values.jobConfigs "backends.yaml" }}
{{- fail "jobConfigs may not hold backends.yaml: the chart writes the backends list there (set backends instead)" }}
{{- end }}
{{- range .Values.backends }}
{{- $name := .name }}
{{- with .job }}
{{- $f := toString .configFile }}
{{- $key := trimPrefix $dir $f }}
{{- if not (or (and (hasPrefix $dir $f) (hasKey $.Values.jobConfigs $key)) (include "videogen.inExtraMount" (dict "root" $ "path" $f))) }}
{{- fail (printf "backend %s: job.configFile %s is not mounted in the manager: put the Job backend config in jobConfigs (key %s) and name it %s%s, %s" $name $f (base $f) $dir (base $f) $extra) }}
{{- end }}
{{- end }}
{{- with .http }}
{{- $f := toString .tokenFile }}
{{- if and .tokenFile (not (hasPrefix "/etc/videogen/worker/" $f)) (not (include "videogen.inExtraMount" (dict "root" $ "path" $f))) }}
{{- fail (printf "backend %s: http.tokenFile %s is not mounted in the manager: mount its Secret with manager.extraVolumes and manager.extraVolumeMounts (or name the worker token, /etc/videogen/worker/token)" $name $f) }}
{{- end }}
{{- end }}
{{- end -}}
backends.yaml: |
  {{- include "videogen.backends" . | nindent 2 }}
{{- range $name, $config := .Values.jobConfigs }}
{{ $name }}: |
  {{- (kindIs "string" $config | ternary $config (toYaml $config)) | nindent 2 }}
{{- end }}
{{- end }}

{{/* An object of config/ (a copy in files/) as this release installs it: what kustomize's
namePrefix and namespace do to config/default (names prefixed, references to other objects of
the release included, the release namespace for namespaced objects) and this release's labels.
Arguments: root (the chart's context) and obj. */}}
{{- define "videogen.adopt" -}}
{{- $root := .root }}
{{- $prefix := include "videogen.prefix" $root }}
{{- $obj := .obj }}
{{- $meta := $obj.metadata }}
{{- $_ := set $meta "name" (printf "%s-%s" $prefix $meta.name) }}
{{- $own := include "videogen.operatorLabels" $root | fromYaml }}
{{- if eq (get (default dict $meta.labels) "app.kubernetes.io/name") "videogen-worker" }}
{{- $own = include "videogen.workerLabels" $root | fromYaml }}
{{- end }}
{{- $_ := set $meta "labels" (merge $own (default dict $meta.labels)) }}
{{- if $meta.namespace }}
{{- $_ := set $meta "namespace" $root.Release.Namespace }}
{{- end }}
{{- if and $obj.spec $obj.spec.policyName }}
{{- $_ := set $obj.spec "policyName" (printf "%s-%s" $prefix $obj.spec.policyName) }}
{{- end }}
{{- if $obj.roleRef }}
{{- $_ := set $obj.roleRef "name" (printf "%s-%s" $prefix $obj.roleRef.name) }}
{{- range $obj.subjects }}
{{- if eq .kind "ServiceAccount" }}
{{- $_ := set . "name" (printf "%s-%s" $prefix .name) }}
{{- $_ := set . "namespace" $root.Release.Namespace }}
{{- end }}
{{- end }}
{{- end }}
{{- /* kustomize does not prefix annotations, so config/ writes the account's final name. */}}
{{- $sa := get (default dict $meta.annotations) "kubernetes.io/service-account.name" }}
{{- if $sa }}
{{- $_ := set $meta.annotations "kubernetes.io/service-account.name" (printf "%s-%s" $prefix (trimPrefix "videogen-" $sa)) }}
{{- end }}
{{- toYaml $obj }}
{{- end }}

{{/* Every object of the files matching glob, adopted (see videogen.adopt); files may hold
several documents. */}}
{{- define "videogen.adoptFiles" -}}
{{- $root := .root }}
{{- range $path, $_ := $root.Files.Glob .glob }}
{{- range $doc := regexSplit "(?m)^---\\s*$" ($root.Files.Get $path) -1 }}
{{- $obj := fromYaml $doc }}
{{- if $obj.kind }}
---
{{ include "videogen.adopt" (dict "root" $root "obj" $obj) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
