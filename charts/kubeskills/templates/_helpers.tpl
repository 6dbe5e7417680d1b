{{/*
The chart's name, or nameOverride.
*/}}
{{- define "kubeskills.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every namespaced object's name: fullnameOverride, else the
release name when it already contains the chart's name, else both.
*/}}
{{- define "kubeskills.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The chart label: name and version.
*/}}
{{- define "kubeskills.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "kubeskills.labels" -}}
helm.sh/chart: {{ include "kubeskills.chart" . }}
{{ include "kubeskills.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubeskills
{{- end }}

{{/*
Labels that select the manager's pods.
*/}}
{{- define "kubeskills.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubeskills.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The ServiceAccount the manager runs as.
*/}}
{{- define "kubeskills.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubeskills.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The manager's image: repository and digest, or repository and tag (the
chart's appVersion by default).
*/}}
{{- define "kubeskills.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{/*
Whether the replicas elect a leader: when asked, and always with more than
one replica.
*/}}
{{- define "kubeskills.leaderElection" -}}
{{- if or .Values.leaderElection.enabled (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}
