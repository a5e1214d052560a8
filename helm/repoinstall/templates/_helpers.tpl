{{/*
Names and labels.
*/}}
{{- define "repoinstall.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "repoinstall.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "repoinstall.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "repoinstall.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "repoinstall.selectorLabels" -}}
app.kubernetes.io/name: {{ include "repoinstall.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "repoinstall.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "repoinstall.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: repoinstall
{{- end }}

{{- define "repoinstall.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "repoinstall.claimName" -}}
{{- default (printf "%s-repo" (include "repoinstall.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{- define "repoinstall.configName" -}}
{{- printf "%s-requirements" (include "repoinstall.fullname" .) }}
{{- end }}

{{/*
The lock file (pinned versions with hashes, installed as one locked tree): the ConfigMap that holds it (the
chart's own for install.lockFile, or install.lockConfigMap's), its key, which is also its file name, and its
path in containers. All empty when no lock file is given.
*/}}
{{- define "repoinstall.lockConfigName" -}}
{{- if .Values.install.lockFile }}
{{- printf "%s-lock" (include "repoinstall.fullname" .) }}
{{- else }}
{{- get (.Values.install.lockConfigMap | default dict) "name" }}
{{- end }}
{{- end }}

{{- define "repoinstall.lockKey" -}}
{{- if .Values.install.lockFile }}
{{- .Values.install.lockFileName }}
{{- else }}
{{- get (.Values.install.lockConfigMap | default dict) "key" }}
{{- end }}
{{- end }}

{{- define "repoinstall.lockPath" -}}
{{- with include "repoinstall.lockKey" . }}
{{- printf "/etc/repoinstall/lock/%s" . }}
{{- end }}
{{- end }}

{{/*
PUBLIC: what a changed lock file changes, for a checksum/lock annotation on a pod template (the prewarm Job's,
the example worker's, a workload's own) so that a new lock makes new pods: the content of install.lockFile;
of an existing ConfigMap, which the chart cannot see, only its name and key. Empty without a lock file.
*/}}
{{- define "repoinstall.lockChecksum" -}}
{{- if .Values.install.lockFile }}
{{- printf "%s\n%s" .Values.install.lockFileName .Values.install.lockFile | sha256sum }}
{{- else if include "repoinstall.lockKey" . }}
{{- printf "configmap %s %s" (include "repoinstall.lockConfigName" .) (include "repoinstall.lockKey" .) | sha256sum }}
{{- end }}
{{- end }}

{{/*
The repo's path inside a container.
*/}}
{{- define "repoinstall.repoPath" -}}
{{- .Values.repo.mountPath }}
{{- end }}

{{/*
`repoinstall ensure` for the requirements ConfigMap and the lock file, with every setting from values: the
requirements file unless only a lock file is given, then the lock file (one locked tree). Credentials never
appear here: they come from a Secret through the environment (PIP_INDEX_URL, NETRC).
*/}}
{{- define "repoinstall.ensureArgs" -}}
{{- $lock := include "repoinstall.lockPath" . -}}
- ensure
{{- if or .Values.requirements (not $lock) }}
- --requirement
- /etc/repoinstall/requirements.txt
{{- end }}
{{- with $lock }}
- --requirement
- {{ . | quote }}
{{- end }}
- --repo
- {{ include "repoinstall.repoPath" . | quote }}
{{- with .Values.index.url }}
- --index-url
- {{ . | quote }}
{{- end }}
{{- range .Values.index.extraUrls }}
- --extra-index-url
- {{ . | quote }}
{{- end }}
{{- if .Values.install.together }}
- --together
{{- end }}
{{- with .Values.registry.repository }}
- --from
- {{ . | quote }}
- --registry-timeout
- {{ $.Values.registry.timeout | quote }}
{{- if $.Values.registry.plainHttp }}
- --plain-http
{{- end }}
{{- end }}
{{- end }}

{{- define "repoinstall.env" -}}
- name: REPOINSTALL_STALE_AFTER
  value: {{ .Values.lock.staleAfter | quote }}
- name: REPOINSTALL_HEARTBEAT
  value: {{ .Values.lock.heartbeat | quote }}
- name: REPOINSTALL_WAIT_TIMEOUT
  value: {{ .Values.lock.waitTimeout | quote }}
- name: REPOINSTALL_NO_LOCK
  value: {{ ternary "1" "0" .Values.lock.disabled | quote }}
- name: REPOINSTALL_INSTALL_TIMEOUT
  value: {{ .Values.install.timeout | quote }}
- name: REPOINSTALL_JOBS
  value: {{ .Values.install.jobs | quote }}
- name: REPOINSTALL_INSTALLER
  value: {{ .Values.install.installer | quote }}
- name: REPOINSTALL_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: REPOINSTALL_INDEX_TTL
  value: {{ .Values.index.cacheTtl | quote }}
- name: REPOINSTALL_REFRESH
  value: {{ ternary "1" "0" .Values.index.refresh | quote }}
{{- with .Values.index.existingSecret }}
- name: PIP_INDEX_URL
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.index.secretKey }}
{{- end }}
{{- if .Values.index.netrcSecret }}
- name: NETRC
  value: /etc/repoinstall/netrc/{{ .Values.index.netrcKey }}
{{- end }}
{{- if and .Values.registry.repository .Values.registry.existingSecret }}
- name: REGISTRY_AUTH_FILE
  value: /etc/repoinstall/registry/config.json
{{- end }}
{{- if and .Values.registry.repository .Values.registry.caSecret }}
- name: REPOINSTALL_REGISTRY_CA
  value: /etc/repoinstall/registry-ca/{{ .Values.registry.caKey }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "repoinstall.mounts" -}}
- name: repoinstall-repo
  mountPath: {{ include "repoinstall.repoPath" . }}
  {{- with .Values.repo.subPath }}
  subPath: {{ . }}
  {{- end }}
- name: repoinstall-requirements
  mountPath: /etc/repoinstall
  readOnly: true
- name: repoinstall-tmp
  mountPath: /tmp
{{- if .Values.index.netrcSecret }}
- name: repoinstall-netrc
  mountPath: /etc/repoinstall/netrc
  readOnly: true
{{- end }}
{{- if include "repoinstall.lockKey" . }}
- name: repoinstall-lock
  mountPath: /etc/repoinstall/lock
  readOnly: true
{{- end }}
{{- if and .Values.registry.repository .Values.registry.existingSecret }}
- name: repoinstall-registry-auth
  mountPath: /etc/repoinstall/registry
  readOnly: true
{{- end }}
{{- if and .Values.registry.repository .Values.registry.caSecret }}
- name: repoinstall-registry-ca
  mountPath: /etc/repoinstall/registry-ca
  readOnly: true
{{- end }}
{{- end }}

{{/*
PUBLIC: the init containers to put in front of a workload that imports from the repo (the volume
permissions step when volumePermissions.enabled, then repoinstall):

    initContainers:
      {{- include "repoinstall.initContainer" . | nindent 8 }}
    volumes:
      {{- include "repoinstall.volumes" . | nindent 8 }}
    containers:
      - volumeMounts:
          {{- include "repoinstall.repoMount" . | nindent 10 }}

From a parent chart that has this one as a dependency, pass the subchart's scope: .Subcharts.repoinstall.
It ensures the requirements (a no-op, in milliseconds, once they are installed) before the workload starts.
*/}}
{{- define "repoinstall.initContainer" -}}
{{- list (include "repoinstall.volumePermissions" . | trim) (include "repoinstall.container" .) | compact | join "\n" }}
{{- end }}

{{/*
The repoinstall container: `repoinstall ensure` of the requirements.
*/}}
{{- define "repoinstall.container" -}}
{{- include "repoinstall.containerFor" (dict "root" . "push" false) }}
{{- end }}

{{/*
The prewarm Job's container: the same, and with registry.repository and registry.push, `--push` too (the
trees it installed from an index go to the registry; init containers only pull).
*/}}
{{- define "repoinstall.prewarmContainer" -}}
{{- include "repoinstall.containerFor" (dict "root" . "push" (and .Values.registry.repository .Values.registry.push)) }}
{{- end }}

{{- define "repoinstall.containerFor" -}}
{{- $push := .push }}
{{- with .root }}
- name: repoinstall
  image: {{ include "repoinstall.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  {{- /* The command is set, not left to the image's ENTRYPOINT: the workers' own image may be used. */}}
  command: {{ toJson .Values.command }}
  args:
    {{- include "repoinstall.ensureArgs" . | nindent 4 }}
    {{- if $push }}
    - --push
    {{- end }}
  env:
    {{- include "repoinstall.env" . | nindent 4 }}
  volumeMounts:
    {{- include "repoinstall.mounts" . | nindent 4 }}
  {{- with .Values.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
The volume permissions step (empty unless volumePermissions.enabled): Kubernetes applies fsGroup only to
volumes whose driver supports it, which NFS and most ReadWriteMany CSI drivers do not. It runs as root with
only the capabilities it needs and hands the repo's directory to runAsUser and fsGroup with mode 2775
(setgid: what repoinstall creates below keeps the group). A root-squashing export refuses it: set the
owner on the server instead.
*/}}
{{- define "repoinstall.volumePermissions" -}}
{{- if .Values.volumePermissions.enabled }}
{{- $user := required "volumePermissions needs podSecurityContext.runAsUser" .Values.podSecurityContext.runAsUser }}
{{- $group := required "volumePermissions needs podSecurityContext.fsGroup or runAsGroup" (coalesce .Values.podSecurityContext.fsGroup .Values.podSecurityContext.runAsGroup) }}
{{- $image := .Values.volumePermissions.image }}
- name: repoinstall-volume-permissions
  image: {{ printf "%s:%s" (default .Values.image.repository $image.repository) (default (default .Chart.AppVersion .Values.image.tag) $image.tag) }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["install", "-d", "-o", "{{ $user }}", "-g", "{{ $group }}", "-m", "2775", {{ include "repoinstall.repoPath" . | quote }}]
  securityContext:
    runAsUser: 0
    runAsNonRoot: false
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: [ALL]
      add: [CHOWN, FOWNER, FSETID]
  volumeMounts:
    - name: repoinstall-repo
      mountPath: {{ include "repoinstall.repoPath" . }}
      {{- with .Values.repo.subPath }}
      subPath: {{ . }}
      {{- end }}
  {{- with .Values.volumePermissions.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
PUBLIC: the volumes the init container (and the workload's repo mount) need.
*/}}
{{- define "repoinstall.volumes" -}}
- name: repoinstall-repo
  persistentVolumeClaim:
    claimName: {{ include "repoinstall.claimName" . }}
- name: repoinstall-requirements
  configMap:
    name: {{ include "repoinstall.configName" . }}
- name: repoinstall-tmp
  emptyDir: {}
{{- if .Values.index.netrcSecret }}
- name: repoinstall-netrc
  secret:
    secretName: {{ .Values.index.netrcSecret }}
    defaultMode: 0400
{{- end }}
{{- with include "repoinstall.lockKey" . }}
- name: repoinstall-lock
  configMap:
    name: {{ include "repoinstall.lockConfigName" $ }}
    {{- /* Only the lock file, under its key's name: a ConfigMap without that key fails the pod at once. */}}
    items:
      - key: {{ . | quote }}
        path: {{ . | quote }}
{{- end }}
{{- if and .Values.registry.repository .Values.registry.existingSecret }}
- name: repoinstall-registry-auth
  secret:
    secretName: {{ .Values.registry.existingSecret }}
    defaultMode: 0400
    {{- /* Only the Docker config JSON, as the file auth tools read: a Secret without that key fails the pod at once. */}}
    items:
      - key: {{ .Values.registry.secretKey | quote }}
        path: config.json
{{- end }}
{{- if and .Values.registry.repository .Values.registry.caSecret }}
- name: repoinstall-registry-ca
  secret:
    secretName: {{ .Values.registry.caSecret }}
    defaultMode: 0444
    items:
      - key: {{ .Values.registry.caKey | quote }}
        path: {{ .Values.registry.caKey | quote }}
{{- end }}
{{- end }}

{{/*
PUBLIC: the repo mount for the workload's own containers (read-only: workers only import).
*/}}
{{- define "repoinstall.repoMount" -}}
- name: repoinstall-repo
  mountPath: {{ include "repoinstall.repoPath" . }}
  readOnly: true
  {{- with .Values.repo.subPath }}
  subPath: {{ . }}
  {{- end }}
{{- end }}

{{/*
The chart's pods' own labels and annotations (e.g. a service mesh's sidecar opt-out), from podLabels and
podAnnotations, under template.metadata; with a lock file, checksum/lock too, so that a changed lock makes
new pods (Helm's checksum/config practice).
*/}}
{{- define "repoinstall.podMetadata" -}}
{{- $annotations := deepCopy (.Values.podAnnotations | default dict) -}}
{{- with include "repoinstall.lockChecksum" . }}
{{- $_ := set $annotations "checksum/lock" . }}
{{- end -}}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "repoinstall.podSettings" -}}
{{- /* repoinstall never talks to the Kubernetes API: no token in its pods. */}}
automountServiceAccountToken: false
{{- /* Image volumes are pulled with the pod's pull secrets: the registry's Secret joins them. */}}
{{- $secrets := .Values.imagePullSecrets | default list }}
{{- if and .Values.imageVolumes.trees .Values.registry.existingSecret }}
{{- $secrets = append $secrets (dict "name" .Values.registry.existingSecret) }}
{{- end }}
{{- with $secrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
PUBLIC: Kubernetes image volumes, one per imageVolumes.trees entry (KEP-4639: the node's runtime pulls the
image once, shares its layers by digest, and mounts it read-only; each layer is one stored distribution at its
path in the tree, so the mount is the tree). Empty without trees. With imageCheck, imageMounts and
imagePythonPath:

    volumes:
      {{- include "repoinstall.imageVolumes" . | nindent 8 }}
    initContainers:
      {{- include "repoinstall.imageCheck" . | nindent 8 }}
    containers:
      - env:
          {{- include "repoinstall.imagePythonPath" . | nindent 10 }}
        volumeMounts:
          {{- include "repoinstall.imageMounts" . | nindent 10 }}
*/}}
{{- define "repoinstall.imageVolumes" -}}
{{- range .Values.imageVolumes.trees }}
- name: tree-{{ .name }}
  image:
    reference: {{ .reference | quote }}
    {{- with .pullPolicy }}
    pullPolicy: {{ . }}
    {{- end }}
{{- end }}
{{- end }}

{{/*
PUBLIC: the image volumes' mounts, read-only at imageVolumes.mountRoot/NAME.
*/}}
{{- define "repoinstall.imageMounts" -}}
{{- range .Values.imageVolumes.trees }}
- name: tree-{{ .name }}
  mountPath: {{ printf "%s/%s" $.Values.imageVolumes.mountRoot .name | quote }}
  readOnly: true
{{- end }}
{{- end }}

{{/*
PUBLIC: an init container that checks every image volume's mount before the workers import from it
(`repoinstall check-trees`): one mounted noexec (CRI-O's first image-volume support: every C extension fails
with "failed to map segment") or empty (k3s#14323) fails the pod at start with one line in this container's
log, instead of its workers at their first import. Empty without trees. Put it in the workload's
initContainers, beside imageVolumes, imageMounts and imagePythonPath.
*/}}
{{- define "repoinstall.imageCheck" -}}
{{- with .Values.imageVolumes.trees }}
- name: repoinstall-check-trees
  image: {{ include "repoinstall.image" $ }}
  imagePullPolicy: {{ $.Values.image.pullPolicy }}
  command: {{ toJson $.Values.command }}
  args:
    - check-trees
    {{- range . }}
    - {{ printf "%s/%s" $.Values.imageVolumes.mountRoot .name | quote }}
    {{- end }}
  volumeMounts:
    {{- include "repoinstall.imageMounts" $ | nindent 4 }}
  {{- with $.Values.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $.Values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
PUBLIC: PYTHONPATH with every image volume's mount, in the order of imageVolumes.trees (the first wins a
module two trees hold).
*/}}
{{- define "repoinstall.imagePythonPath" -}}
{{- $paths := list }}
{{- range .Values.imageVolumes.trees }}
{{- $paths = append $paths (printf "%s/%s" $.Values.imageVolumes.mountRoot .name) }}
{{- end }}
{{- with $paths }}
- name: PYTHONPATH
  value: {{ join ":" . | quote }}
{{- end }}
{{- end }}
