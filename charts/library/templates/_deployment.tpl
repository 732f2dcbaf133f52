{{/*
library.deployment renders the service's Deployment. Every service is the
same shape (one Go binary serving HTTP on HTTP_ADDR with /healthz, /readyz and
/metrics), so the differences live only in values.
*/}}
{{- define "library.deployment" -}}
{{- $port := int .Values.containerPort }}
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
        prometheus.io/port: {{ $port | quote }}
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
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
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
library.env renders the container's environment: HTTP_ADDR from
containerPort (so probes, ports and the listener cannot disagree), then
.Values.env (name: value; null removes a variable set by values.yaml), then
.Values.secretEnv (name: {secretName, key}). The charts test checks that the
names equal exactly what the service's server.Config reads.
*/}}
{{- define "library.env" -}}
- name: HTTP_ADDR
  value: {{ printf ":%d" (int .Values.containerPort) | quote }}
{{- range $name, $value := .Values.env }}
{{- if not (kindIs "invalid" $value) }}
{{- if or (eq $name "HTTP_ADDR") (get ($.Values.secretEnv | default dict) $name) }}
{{- fail (printf "env %s is set twice (env, secretEnv or the HTTP_ADDR the chart derives from containerPort)" $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}
{{- range $name, $ref := .Values.secretEnv }}
{{- if $ref }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ required (printf "secretEnv.%s.secretName is required" $name) $ref.secretName }}
      key: {{ required (printf "secretEnv.%s.key is required" $name) $ref.key }}
{{- end }}
{{- end }}
{{- end }}
