{{/*
Names and labels shared by every template.

Objects are named after the release, or `fullnameOverride` when set. The
release name is the prefix `ferry peer join --release` expects (the peer
ClusterRole `<name>-peer`, the peer accounts `<name>-peer-<peer>`), so the
chart does not append its own name to it.
*/}}

{{/* The app name: the chart's, or nameOverride. */}}
{{- define "ferry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name. */}}
{{- define "ferry.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* `<chart>-<version>` for the helm.sh/chart label. */}}
{{- define "ferry.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels that pick the operator's pods; never changed on upgrade. */}}
{{- define "ferry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ferry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "ferry.labels" -}}
helm.sh/chart: {{ include "ferry.chart" . }}
{{ include "ferry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ferry
{{- end }}

{{/* The operator's ServiceAccount: created by the chart, or one of the user's. */}}
{{- define "ferry.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ferry.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Lease the replicas elect their leader with: one per release. */}}
{{- define "ferry.leaseName" -}}
{{- default (printf "%s-leader" (include "ferry.fullname" .)) .Values.leaderElection.leaseName }}
{{- end }}

{{/* The image reference: a digest pins it, else the tag (the chart's appVersion by default). */}}
{{- define "ferry.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}
