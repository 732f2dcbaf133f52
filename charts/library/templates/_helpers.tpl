{{/*
Naming and labels shared by every resource. Names follow Helm's convention
(release-chart, truncated to 63 characters, the DNS label limit) unless the
release is already named after the chart, so `helm install accounts
charts/accounts` yields plain "accounts" resources that other services can
address by a stable Service name.
*/}}

{{- define "library.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "library.fullname" -}}
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

{{- define "library.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels must never change after the first install: a
Deployment's selector is immutable. Keep them to name and instance. */}}
{{- define "library.selectorLabels" -}}
app.kubernetes.io/name: {{ include "library.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The version label is the image tag cut to what a label value may be
(63 characters, a letter or digit at each end); an OCI tag may be up to 128
and start with "_". The image itself is pinned to the whole tag, or to its
digest when one is given. */}}
{{- define "library.labels" -}}
helm.sh/chart: {{ include "library.chart" . }}
{{ include "library.selectorLabels" . }}
app.kubernetes.io/version: {{ include "library.imageTag" . | trunc 63 | trimAll "-_." | quote }}
app.kubernetes.io/component: {{ .Values.component | default "service" }}
app.kubernetes.io/part-of: esim
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "library.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "library.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The tag defaults to global.image.tag (the umbrella chart's one tag for
every service), then to the chart's appVersion, so a chart release pins the
image it was tested with; "latest" is refused because it makes rollouts
unreproducible and breaks rollback. */}}
{{- define "library.imageTag" -}}
{{- $global := (.Values.global | default dict).image | default dict }}
{{- $tag := .Values.image.tag | default $global.tag | default .Chart.AppVersion | toString }}
{{- if eq $tag "latest" }}
{{- fail "image.tag must not be \"latest\": pin a version or a digest" }}
{{- end }}
{{- $tag }}
{{- end }}

{{/* A digest, when given, wins over the tag: it is what CI and `make images`
produce, and it cannot be moved. global.image.registry (the umbrella
chart's) replaces the repository's registry and path, keeping its last
element, the service's name: one mirror serves every image. */}}
{{- define "library.image" -}}
{{- $repo := required "image.repository is required" .Values.image.repository }}
{{- with ((.Values.global | default dict).image | default dict).registry }}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) (base $repo) }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (include "library.imageTag" .) }}
{{- end }}
{{- end }}
