{{/* Names and labels shared by every template. */}}
{{- define "ptah.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ptah.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ptah.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ptah.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "ptah.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "ptah.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ptah
{{- end -}}

{{- define "ptah.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ptah.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ptah.runnerServiceAccountName" -}}
{{- if .Values.runner.serviceAccount.create -}}
{{- default (printf "%s-runner" (include "ptah.fullname" .)) .Values.runner.serviceAccount.name -}}
{{- else -}}
{{- .Values.runner.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ptah.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "ptah.runnerImage" -}}
{{- $repo := default .Values.image.repository .Values.runner.image.repository -}}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.runner.image.tag -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{- define "ptah.lockNamespace" -}}
{{- default .Release.Namespace .Values.lockNamespace -}}
{{- end -}}

{{/* Refuse values the operator cannot honour, instead of installing one that ignores them. */}}
{{- define "ptah.planCacheName" -}}
{{ include "ptah.fullname" . }}-plan-cache
{{- end -}}

{{- define "ptah.validate" -}}
{{- if and .Values.runner.cache.persistentVolumeClaim.create (not .Values.watch.namespaces) -}}
{{- fail "runner.cache.persistentVolumeClaim.create needs watch.namespaces (a claim is made in each); with every namespace watched, create the claims and set runner.cache.volume" -}}
{{- end -}}
{{- if and .Values.runner.cache.persistentVolumeClaim.create .Values.runner.cache.volume -}}
{{- fail "runner.cache: set volume or persistentVolumeClaim.create, not both" -}}
{{- end -}}
{{- if and .Values.watch.labelSelector (or (contains "!" .Values.watch.labelSelector) (contains " in " .Values.watch.labelSelector) (contains "(" .Values.watch.labelSelector)) -}}
{{- fail "watch.labelSelector: equality only (key=value,key2=value2)" -}}
{{- end -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicaCount) 1) -}}
{{- fail "replicaCount > 1 needs leaderElection.enabled: two unelected replicas would reconcile the same resources" -}}
{{- end -}}
{{- end -}}
