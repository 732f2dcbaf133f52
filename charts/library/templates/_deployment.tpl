{{/*
library.deployment renders the service's Deployment. Every service is the
same shape (one Go binary serving its API, /healthz and /readyz on HTTP_ADDR
and /metrics alone on METRICS_ADDR), so the differences live only in values.
*/}}
{{- define "library.deployment" -}}
{{- $port := int .Values.containerPort }}
{{- $metricsPort := include "library.metricsPort" . }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "library.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "library.labels" . | nindent 4 }}
spec:
  {{- /* With an HPA the replica count belongs to the autoscaler: setting it
  here would reset the live count on every upgrade. */}}
  {{- if not .Values.autoscaling.enabled }}
  replicas: {{ .Values.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "library.selectorLabels" . | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      # Never drop below the desired capacity during a rollout.
      maxUnavailable: 0
      maxSurge: 25%
  template:
    metadata:
      labels:
        {{- include "library.labels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- if .Values.metrics.enabled }}
        # Annotation-based discovery works with a stock Prometheus without
        # the operator's CRDs.
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $metricsPort | quote }}
        prometheus.io/path: {{ .Values.metrics.path | quote }}
        {{- end }}
        {{- if .Values.devSecret.create }}
        # Environment variables from a Secret are read only at container
        # start: roll the pods when the chart-managed Secret changes.
        checksum/secret: {{ toJson .Values.devSecret.stringData | sha256sum }}
        {{- end }}
        {{- with .Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "library.serviceAccountName" . }}
      # The services never call the Kubernetes API.
      automountServiceAccountToken: false
      # Service links would add *_SERVICE_HOST variables for every Service in
      # the namespace; the services read only their declared configuration.
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if .Values.topologySpread.enabled }}
      # Spread replicas over nodes and zones so one failure never takes the
      # whole service; ScheduleAnyway keeps single-node clusters working.
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "library.selectorLabels" . | nindent 14 }}
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "library.selectorLabels" . | nindent 14 }}
      {{- end }}
      containers:
        - name: {{ .Chart.Name }}
          image: {{ include "library.image" . | quote }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          ports:
            - name: http
              containerPort: {{ $port }}
              protocol: TCP
            - name: metrics
              containerPort: {{ $metricsPort }}
              protocol: TCP
            {{- range (include "library.extraPorts" . | fromYamlArray) }}
            - name: {{ .name }}
              containerPort: {{ int .containerPort }}
              protocol: TCP
            {{- end }}
          env:
            {{- include "library.env" . | nindent 12 }}
          # Startup allows for migrations at boot (up to
          # periodSeconds x failureThreshold) before liveness takes over.
          startupProbe:
            httpGet:
              path: /healthz
              port: http
            periodSeconds: {{ .Values.probes.startup.periodSeconds }}
            failureThreshold: {{ .Values.probes.startup.failureThreshold }}
            timeoutSeconds: 2
          # Liveness checks only the process, never dependencies: a database
          # outage must not restart every pod.
          livenessProbe:
            httpGet:
              path: /healthz
              port: http
            periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
            failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
            timeoutSeconds: 2
          # Readiness pings dependencies and takes the pod out of the Service
          # while they are unreachable.
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
            periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
            failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
            timeoutSeconds: 2
          {{- if .Values.preStopSleepSeconds }}
          # Endpoints are removed asynchronously; keep serving for a moment
          # after SIGTERM is due so no request hits a closed listener. The
          # sleep action needs no shell, which the image does not have.
          lifecycle:
            preStop:
              sleep:
                seconds: {{ .Values.preStopSleepSeconds }}
          {{- end }}
          resources:
            {{- required "resources must set requests and limits" .Values.resources | toYaml | nindent 12 }}
          securityContext:
            runAsNonRoot: true
            runAsUser: 65532
            runAsGroup: 65532
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop:
                - ALL
            seccompProfile:
              type: RuntimeDefault
          volumeMounts:
            # The root filesystem is read-only; /tmp is the one writable place.
            - name: tmp
              mountPath: /tmp
            {{- range .Values.secretFiles }}
            - name: {{ include "library.secretVolumeName" . }}
              mountPath: {{ required (printf "secretFiles %s: mountPath is required" .name) .mountPath }}
              readOnly: true
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- range .Values.secretFiles }}
        - name: {{ include "library.secretVolumeName" . }}
          secret:
            secretName: {{ required (printf "secretFiles %s: secretName is required" .name) .secretName }}
            # 0440: readable by the pod's group (fsGroup 65532) only, and
            # never writable.
            defaultMode: 288
            {{- with .items }}
            items:
              {{- range . }}
              - key: {{ required "secretFiles items: key is required" .key }}
                path: {{ .path | default .key }}
              {{- end }}
            {{- end }}
        {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}

{{/*
library.metricsPort is the port /metrics is served on, and nothing else: a
NetworkPolicy admits by port, not path, so only a port of its own lets
Prometheus in without letting it call the API.
*/}}
{{- define "library.metricsPort" -}}
{{- $port := int (required "metrics.port is required" .Values.metrics.port) }}
{{- if eq $port (int .Values.containerPort) }}
{{- fail (printf "metrics.port %d must differ from containerPort: /metrics gets a port of its own so that a NetworkPolicy can admit Prometheus to it without admitting it to the API" $port) }}
{{- end }}
{{- $port }}
{{- end }}

{{/*
library.extraPorts validates .Values.extraPorts (further listeners besides
HTTP_ADDR: name, containerPort, env, and servicePort, which defaults to
containerPort) and returns them as a YAML list, servicePort filled in. Each
must differ in name and port from http, metrics and the others: one port,
one listener.
*/}}
{{- define "library.extraPorts" -}}
{{- $names := list "http" "metrics" }}
{{- $ports := list (int .Values.containerPort) (int (include "library.metricsPort" .)) }}
{{- $out := list }}
{{- range .Values.extraPorts }}
{{- $name := required "extraPorts: name is required" .name }}
{{- if not (regexMatch "^[a-z]([a-z0-9-]{0,13}[a-z0-9])?$" $name) }}
{{- fail (printf "extraPorts %s: a port name is up to 15 lower-case letters, digits and dashes" $name) }}
{{- end }}
{{- $port := int (required (printf "extraPorts %s: containerPort is required" $name) .containerPort) }}
{{- if or (has $name $names) (has $port $ports) }}
{{- fail (printf "extraPorts %s: name and containerPort %d must differ from http, metrics and the other extraPorts" $name $port) }}
{{- end }}
{{- $names = append $names $name }}
{{- $ports = append $ports $port }}
{{- $out = append $out (dict "name" $name "containerPort" $port "env" (required (printf "extraPorts %s: env is required (the variable that takes its address)" $name) .env) "servicePort" (int (.servicePort | default $port)) "from" .from) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* library.secretVolumeName names the volume of a secretFiles entry apart
from the chart's own (tmp). */}}
{{- define "library.secretVolumeName" -}}
{{- printf "secret-%s" (required "secretFiles: name is required" .name) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
library.env renders the container's environment: HTTP_ADDR from
containerPort, METRICS_ADDR from metrics.port and each extraPorts' env from
its containerPort (so probes, ports and the listeners cannot disagree), then
.Values.env (name: value; null removes a variable set by values.yaml;
global.env, the umbrella chart's settings shared by every service, wins for
a variable the chart declares and has not dropped, so KAFKA_BROKERS reaches only the services
that read it), then
.Values.secretEnv (name: {secretName, key}). METRICS_ADDR is set even with
metrics.enabled false, so the API port never serves /metrics to whoever the
NetworkPolicy admits to it. The charts test checks that the names equal
exactly what the service's server.Config reads.
*/}}
{{- define "library.env" -}}
{{- $extra := include "library.extraPorts" . | fromYamlArray }}
{{- $derived := list "HTTP_ADDR" "METRICS_ADDR" }}
{{- $twice := "env %s is set twice (env, secretEnv, or HTTP_ADDR, METRICS_ADDR and extraPorts' env, which the chart derives from the ports)" -}}
- name: HTTP_ADDR
  value: {{ printf ":%d" (int .Values.containerPort) | quote }}
- name: METRICS_ADDR
  value: {{ printf ":%s" (include "library.metricsPort" .) | quote }}
{{- range $extra }}
{{- if has .env $derived }}
{{- fail (printf $twice .env) }}
{{- end }}
{{- $derived = append $derived .env }}
- name: {{ .env }}
  value: {{ printf ":%d" (int .containerPort) | quote }}
{{- end }}
{{- $shared := (.Values.global | default dict).env | default dict }}
{{- range $name, $value := .Values.env }}
{{- if and (not (kindIs "invalid" $value)) (hasKey $shared $name) (not (kindIs "invalid" (get $shared $name))) (ne (toString (get $shared $name)) "") }}
{{- $value = get $shared $name }}
{{- end }}
{{- if not (kindIs "invalid" $value) }}
{{- if or (has $name $derived) (get ($.Values.secretEnv | default dict) $name) }}
{{- fail (printf $twice $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}
{{- range $name, $ref := .Values.secretEnv }}
{{- if $ref }}
{{- if has $name $derived }}
{{- fail (printf $twice $name) }}
{{- end }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ required (printf "secretEnv.%s.secretName is required" $name) $ref.secretName }}
      key: {{ required (printf "secretEnv.%s.key is required" $name) $ref.key }}
{{- end }}
{{- end }}
{{- end }}
