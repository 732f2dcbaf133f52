{{- define "library.service" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "library.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "library.labels" . | nindent 4 }}
  {{- with .Values.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ .Values.service.type }}
  selector:
    {{- include "library.selectorLabels" . | nindent 4 }}
  ports:
    - name: http
      port: {{ .Values.service.port }}
      targetPort: http
      protocol: TCP
      {{- if and (eq .Values.service.type "NodePort") .Values.service.nodePort }}
      nodePort: {{ .Values.service.nodePort }}
      {{- end }}
    {{- range (include "library.extraPorts" . | fromYamlArray) }}
    - name: {{ .name }}
      port: {{ .servicePort }}
      targetPort: {{ .name }}
      protocol: TCP
    {{- end }}
{{- end }}

{{- define "library.serviceaccount" -}}
{{- if .Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "library.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "library.labels" . | nindent 4 }}
  {{- with .Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
# A dedicated account with no token: a compromised pod gets no API access.
automountServiceAccountToken: false
{{- end }}
{{- end }}

{{- define "library.hpa" -}}
{{- if .Values.autoscaling.enabled }}
{{- if lt (int .Values.autoscaling.minReplicas) 2 }}
{{- fail "autoscaling.minReplicas must be at least 2: one replica cannot survive a node drain" }}
{{- end }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "library.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "library.labels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "library.fullname" . }}
  minReplicas: {{ .Values.autoscaling.minReplicas }}
  maxReplicas: {{ .Values.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ .Values.autoscaling.targetCPUUtilizationPercentage }}
  behavior:
    # Scale up fast on load, down slowly so a short lull does not cause
    # churn (and cold connection pools) right before the next burst.
    scaleDown:
      stabilizationWindowSeconds: 300
      policies:
        - type: Percent
          value: 50
          periodSeconds: 60
{{- end }}
{{- end }}

{{- define "library.pdb" -}}
{{- if .Values.podDisruptionBudget.enabled }}
{{- $maxUnavailable := .Values.podDisruptionBudget.maxUnavailable }}
{{- /* By value, not truthiness: the string "0" is truthy and renders as
the number 0, and "00%" or 0.0 block drains as 0 does. Only a whole number
or percentage above zero, written plainly, passes. */}}
{{- if not (regexMatch "^[1-9][0-9]*%?$" (toString $maxUnavailable)) }}
{{- fail (printf "podDisruptionBudget.maxUnavailable %v must allow at least one eviction (a whole number or percentage above zero): 0 blocks every node drain" $maxUnavailable) }}
{{- end }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "library.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "library.labels" . | nindent 4 }}
spec:
  # maxUnavailable (not minAvailable) so a drain never deadlocks when the
  # service runs a single replica.
  maxUnavailable: {{ $maxUnavailable }}
  # Pods that are not Ready receive no traffic: evicting them loses none.
  # The default (IfHealthyBudget) protects them too: when every replica is
  # unready at once (readiness follows Postgres, so a database outage does
  # it) no pod may be evicted and node drains hang until the outage ends.
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      {{- include "library.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{- define "library.networkpolicy" -}}
{{- if .Values.networkPolicy.enabled }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "library.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "library.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "library.selectorLabels" . | nindent 6 }}
  {{- $egress := .Values.networkPolicy.egress | default dict }}
  policyTypes:
    - Ingress
    {{- if $egress.enabled }}
    - Egress
    {{- end }}
  ingress:
    # The HTTP port (the API and the probes) is reachable only from the
    # callers named in values, when any are: the services behind the
    # gateway are not public.
    {{- $extra := include "library.extraPorts" . | fromYamlArray }}
    - ports:
        - port: http
          protocol: TCP
        {{- /* A further listener (extraPorts) without peers of its own is
        the same callers'. */}}
        {{- range $extra }}
        {{- if not .from }}
        - port: {{ .name }}
          protocol: TCP
        {{- end }}
        {{- end }}
      {{- with .Values.networkPolicy.from }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- /* One with peers (ordering's ES2+ listener: the SM-DP+, not the
    API's callers) admits those alone. */}}
    {{- range $extra }}
    {{- if .from }}
    # {{ .name }}
    - ports:
        - port: {{ .name }}
          protocol: TCP
      from:
        {{- toYaml .from | nindent 8 }}
    {{- end }}
    {{- end }}
    {{- /* Without metrics nothing scrapes the metrics port, so no rule
    admits anyone to it. */}}
    {{- if .Values.metrics.enabled }}
    # The metrics port serves /metrics and nothing else, so its scrapers
    # get no way into the API.
    - ports:
        - port: metrics
          protocol: TCP
      {{- with .Values.metrics.from }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- end }}
  {{- if $egress.enabled }}
  {{- /* With Egress among the policyTypes, whatever no rule below names is
  refused, so no rule may be left without peers: an empty "to" would admit
  every destination. */}}
  egress:
    {{- with $egress.calls }}
    # The services it calls, on their API port alone.
    - to:
        {{- range . }}
        - podSelector:
            matchLabels:
              app.kubernetes.io/name: {{ . }}
        {{- end }}
      ports:
        - port: http
          protocol: TCP
    {{- end }}
    {{- range $name, $peer := $egress.peers }}
    {{- if and $peer $peer.to }}
    {{- if not $peer.ports }}
    {{- fail (printf "networkPolicy.egress.peers.%s names no ports: it would admit every port of its peers" $name) }}
    {{- end }}
    # {{ $name }}
    - to:
        {{- toYaml $peer.to | nindent 8 }}
      ports:
        {{- toYaml $peer.ports | nindent 8 }}
    {{- end }}
    {{- end }}
  {{- end }}
{{- end }}
{{- end }}

{{/* Development only: production Secrets come from the cluster's secret
manager and are referenced by name in secretEnv. */}}
{{- define "library.devsecret" -}}
{{- if .Values.devSecret.create }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ required "devSecret.name is required" .Values.devSecret.name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "library.labels" . | nindent 4 }}
type: Opaque
stringData:
  {{- range $k, $v := .Values.devSecret.stringData }}
  {{ $k }}: {{ $v | toString | quote }}
  {{- end }}
{{- end }}
{{- end }}

{{/* Development only: a CA, a server certificate for the chart's Service
names and a client certificate, for mutual TLS between services in a local
cluster (the SM-DP+ simulator and ordering). They are made afresh at each
render (helm template cannot look up what the cluster holds), so both ends
must be restarted together after a re-render. */}}
{{- define "library.devcerts" -}}
{{- if .Values.devCerts.create }}
{{- $name := include "library.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $days := int (.Values.devCerts.days | default 365) }}
{{- $ca := genCA (printf "esim dev CA (%s)" $name) $days }}
{{- $hosts := list $name (printf "%s.%s" $name $ns) (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.cluster.local" $name $ns) }}
{{- $server := genSignedCert $name nil $hosts $days $ca }}
{{- $client := genSignedCert (required "devCerts.clientCommonName is required" .Values.devCerts.clientCommonName) nil nil $days $ca }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ required "devCerts.name is required" .Values.devCerts.name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "library.labels" . | nindent 4 }}
  annotations:
    # Tells the charts tests these values differ at every render.
    esim.dev/generated: "true"
type: Opaque
stringData:
  ca.crt: |
    {{- $ca.Cert | nindent 4 }}
  tls.crt: |
    {{- $server.Cert | nindent 4 }}
  tls.key: |
    {{- $server.Key | nindent 4 }}
  client.crt: |
    {{- $client.Cert | nindent 4 }}
  client.key: |
    {{- $client.Key | nindent 4 }}
  {{- /* A server certificate of each peer (a service this one calls
  back, such as ordering's ES2+ listener), for its Service's names:
  <peer>.crt and <peer>.key. */}}
  {{- range .Values.devCerts.peers }}
  {{- $peer := genSignedCert . nil (list . (printf "%s.%s" . $ns) (printf "%s.%s.svc" . $ns) (printf "%s.%s.svc.cluster.local" . $ns)) $days $ca }}
  {{ . }}.crt: |
    {{- $peer.Cert | nindent 4 }}
  {{ . }}.key: |
    {{- $peer.Key | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
library.servicemonitor renders, with metrics.serviceMonitor.enabled, a
Prometheus Operator ServiceMonitor scraping metrics.path on the metrics
port, and the Service it needs: the operator finds targets through a
Service port, and the service's own Service carries the API and never
/metrics. The metrics Service is headless (no virtual IP: Prometheus
scrapes each pod) and differs from the API's by its component label,
which is what the ServiceMonitor selects.
*/}}
{{- define "library.servicemonitor" -}}
{{- $sm := .Values.metrics.serviceMonitor | default dict }}
{{- /* The umbrella's global.serviceMonitor turns every service's on, with
its labels added to the service's own. */}}
{{- $global := (.Values.global | default dict).serviceMonitor | default dict }}
{{- if or $sm.enabled $global.enabled }}
{{- if not .Values.metrics.enabled }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled: without it the NetworkPolicy admits no scraper to the metrics port" }}
{{- end }}
{{- $name := printf "%s-metrics" (include "library.fullname" . | trunc 55 | trimSuffix "-") }}
{{- $labels := include "library.labels" . | fromYaml }}
{{- $_ := set $labels "app.kubernetes.io/component" "metrics" }}
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- toYaml $labels | nindent 4 }}
spec:
  type: ClusterIP
  clusterIP: None
  selector:
    {{- include "library.selectorLabels" . | nindent 4 }}
  ports:
    - name: metrics
      port: {{ include "library.metricsPort" . }}
      targetPort: metrics
      protocol: TCP
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "library.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "library.labels" . | nindent 4 }}
    {{- with merge (deepCopy ($sm.labels | default dict)) ($global.labels | default dict) }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  # The job label is the service's name (ordering), not the metrics
  # Service's (ordering-metrics): the dashboard and alerts group by it.
  jobLabel: app.kubernetes.io/name
  selector:
    matchLabels:
      {{- include "library.selectorLabels" . | nindent 6 }}
      app.kubernetes.io/component: metrics
  namespaceSelector:
    matchNames:
      - {{ .Release.Namespace }}
  endpoints:
    - port: metrics
      path: {{ .Values.metrics.path }}
      {{- with $sm.interval }}
      interval: {{ . }}
      {{- end }}
      {{- with $sm.scrapeTimeout }}
      scrapeTimeout: {{ . }}
      {{- end }}
{{- end }}
{{- end }}
