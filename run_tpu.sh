#!/usr/bin/env bash
# Launches official_repro training on a Cloud TPU VM. Run with --help.
# shellcheck disable=SC2088  # '~/...' strings are for the VM's shell to expand.
set -euo pipefail

PROG=${0##*/}

DEFAULT_ACCELERATOR_TYPE=v3-8
# TF 2.20 needs Python >= 3.9. The older `tpu-vm-base` image is Ubuntu 20.04
# with Python 3.8, so the default is the Ubuntu 22.04 base image (Python 3.10)
# that Cloud TPU documents for v4 and older TPUs.
DEFAULT_RUNTIME_VERSION=tpu-ubuntu2204-base
DEFAULT_MODE=train_and_eval
DEFAULT_REPO_DIR_ON_VM='~/official_repro'
DEFAULT_TF_TPU_PACKAGE='tensorflow-tpu==2.20.*'
DEFAULT_TF_TPU_FIND_LINKS=https://storage.googleapis.com/libtpu-tf-releases/index.html
# Where logs and the pid file of the detached run live on the VM.
LOG_DIR_ON_VM='~/official_repro_logs'
# Name of the uploaded tarball in the VM user's home directory.
REMOTE_TARBALL=official_repro_sync.tar.gz

# Copies stdin to stdout with builtins only, so that --dry_run and --help run
# no program at all.
emit() {
  local line
  while IFS= read -r line || [[ -n $line ]]; do
    printf '%s\n' "$line"
  done
}

usage() {
  emit <<EOF
Usage:
  $PROG --tpu_name=NAME --zone=ZONE --gin_file=FILE [--gin_file=FILE ...]
      --model_dir=gs://BUCKET/PATH [options]
  $PROG --tpu_name=NAME --zone=ZONE --delete [--project=ID] [--dry_run]

Creates the Cloud TPU VM NAME (or reuses it if it already exists), copies this
repository to it, installs requirements.txt and TensorFlow's TPU build, and
starts

  python3 -m official_repro.train --gin_file=... --gin_param=... \\
      --model_dir=... --mode=... --strategy=tpu --tpu=local

on worker 0, detached with setsid/nohup so that it survives the ssh session
ending. Its output goes to $LOG_DIR_ON_VM/<model_dir>.log on the VM; the
script ends by printing how to follow that log, stop the run and delete the VM.
The TPU VM keeps running (and costs money) after training ends: delete it with
--delete.

What is copied: the working tree as git sees it -- tracked files plus untracked
files not ignored by .gitignore, uncommitted edits included, .git excluded --
packed into a tarball, uploaded with 'gcloud compute tpus tpu-vm scp' to every
worker and unpacked into --repo_dir_on_vm, replacing the previous copy.

Required:
  --tpu_name=NAME          TPU VM name (lowercase letters, digits, hyphens).
  --zone=ZONE              Cloud zone, e.g. europe-west4-a.
  --gin_file=FILE          Gin file, repeatable, in order. A local file must
                           exist and lie inside this repository (it is passed
                           to the VM by its path inside the repository); a
                           gs:// path is passed through unchecked.
  --model_dir=gs://...     Checkpoints and summaries. Must be a gs:// path:
                           training on a TPU reads and writes Cloud Storage.

Options:
  --project=ID             Cloud project (default: gcloud's configured
                           project, 'gcloud config get-value project').
  --accelerator_type=TYPE  Used when creating the VM (default $DEFAULT_ACCELERATOR_TYPE).
                           Single-host slices only (--tpu=local).
  --runtime_version=VER    TPU software version used when creating the VM
                           (default $DEFAULT_RUNTIME_VERSION; TensorFlow is
                           pip-installed on top of it). 'tpu-vm-base' is too
                           old for TF 2.20 (Python 3.8).
  --preemptible            Create a preemptible TPU VM.
  --spot                   Create a Spot TPU VM.
  --gin_param=BINDING      Gin binding, repeatable, applied after the files,
                           e.g. --gin_param="pretrain_data.input_path='gs://b/r'"
  --mode=MODE              train, eval or train_and_eval (default $DEFAULT_MODE).
  --env=NAME=VALUE         Environment variable for the training process,
                           repeatable.
  --repo_dir_on_vm=DIR     Where the repository goes on the VM (default
                           $DEFAULT_REPO_DIR_ON_VM).
  --tf_tpu_package=SPEC    TensorFlow TPU pip requirement installed after
                           requirements.txt, replacing the 'tensorflow'
                           package (default '$DEFAULT_TF_TPU_PACKAGE').
  --tf_tpu_find_links=URL  pip --find-links for it and libtpu (default
                           $DEFAULT_TF_TPU_FIND_LINKS).
  --skip_install           Copy and launch only; do not run pip.
  --delete                 Only delete the TPU VM --tpu_name (with --zone and
                           --project) and exit.
  --dry_run                Print every command, each on a line starting with
                           '+ ', and run nothing (gcloud is not needed).
  --help                   Show this help.

Example:
  $PROG --tpu_name=electra-v3 --zone=europe-west4-a \\
      --gin_file=gin/quickstart.gin \\
      --gin_param="pretrain_data.input_path='gs://my-bucket/records'" \\
      --model_dir=gs://my-bucket/runs/quickstart
EOF
}

die_usage() {
  printf '%s: error: %s\n' "$PROG" "$1" >&2
  printf "Run '%s --help' for usage.\n" "$PROG" >&2
  exit 2
}

die() {
  printf '%s: error: %s\n' "$PROG" "$1" >&2
  exit 1
}

# Quotes one word for a POSIX shell (and Python's shlex): bare when it only
# has safe characters, else single-quoted with embedded ' written as '\''.
shq() {
  local s=$1
  if [[ -n $s && $s =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
    printf '%s' "$s"
  else
    printf "'%s'" "${s//\'/\'\\\'\'}"
  fi
}

# Like shq, but a leading '~/' stays unquoted so the remote shell expands it.
qpath() {
  local p=$1
  if [[ $p == '~' ]]; then
    printf '~'
  elif [[ $p == '~/'* ]]; then
    printf '~/'
    if [[ -n ${p#'~/'} ]]; then shq "${p#'~/'}"; fi
  else
    shq "$p"
  fi
}

# Quotes one word of a command line; --flag=VALUE as --flag= then VALUE
# quoted, which the shell reads as the same word.
shq_word() {
  if [[ $1 =~ ^--[A-Za-z0-9_-]+= ]]; then
    printf '%s=' "${1%%=*}"
    shq "${1#*=}"
  else
    shq "$1"
  fi
}

# Prints a command: '+ ' then its words quoted.
print_cmd() {
  local line='+' word
  for word in "$@"; do
    line+=" $(shq_word "$word")"
  done
  printf '%s\n' "$line"
}

# Prints a command and, unless --dry_run, runs it.
run() {
  print_cmd "$@"
  if [[ $DRY_RUN == 1 ]]; then
    return 0
  fi
  "$@"
}

note() {
  printf '# %s\n' "$*"
}

# ---------------------------------------------------------------- arguments

TPU_NAME=
ZONE=
PROJECT=
ACCELERATOR_TYPE=$DEFAULT_ACCELERATOR_TYPE
RUNTIME_VERSION=$DEFAULT_RUNTIME_VERSION
MODEL_DIR=
MODE=$DEFAULT_MODE
REPO_DIR_ON_VM=$DEFAULT_REPO_DIR_ON_VM
TF_TPU_PACKAGE=$DEFAULT_TF_TPU_PACKAGE
TF_TPU_FIND_LINKS=$DEFAULT_TF_TPU_FIND_LINKS
PREEMPTIBLE=0
SPOT=0
SKIP_INSTALL=0
DELETE=0
DRY_RUN=0
GIN_FILES=()
GIN_PARAMS=()
ENVS=()

for arg in "$@"; do
  if [[ $arg == --help || $arg == -h ]]; then
    usage
    exit 0
  fi
done

for arg in "$@"; do
  value=${arg#*=}
  case $arg in
    --tpu_name=*) TPU_NAME=$value ;;
    --zone=*) ZONE=$value ;;
    --project=*) PROJECT=$value ;;
    --accelerator_type=*) ACCELERATOR_TYPE=$value ;;
    --runtime_version=*) RUNTIME_VERSION=$value ;;
    --gin_file=*) GIN_FILES+=("$value") ;;
    --gin_param=*) GIN_PARAMS+=("$value") ;;
    --model_dir=*) MODEL_DIR=$value ;;
    --mode=*) MODE=$value ;;
    --env=*) ENVS+=("$value") ;;
    --repo_dir_on_vm=*) REPO_DIR_ON_VM=$value ;;
    --tf_tpu_package=*) TF_TPU_PACKAGE=$value ;;
    --tf_tpu_find_links=*) TF_TPU_FIND_LINKS=$value ;;
    --preemptible) PREEMPTIBLE=1 ;;
    --spot) SPOT=1 ;;
    --skip_install) SKIP_INSTALL=1 ;;
    --delete) DELETE=1 ;;
    --dry_run) DRY_RUN=1 ;;
    --preemptible=* | --spot=* | --skip_install=* | --delete=* | --dry_run=*)
      die_usage "${arg%%=*} is a switch and takes no value (got '$arg')" ;;
    --tpu_name | --zone | --project | --accelerator_type | --runtime_version | \
      --gin_file | --gin_param | --model_dir | --mode | --env | \
      --repo_dir_on_vm | --tf_tpu_package | --tf_tpu_find_links)
      die_usage "$arg needs a value, written $arg=VALUE" ;;
    *) die_usage "unknown flag: $arg" ;;
  esac
done

[[ -n $TPU_NAME ]] || die_usage "--tpu_name is required"
[[ $TPU_NAME =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]] ||
  die_usage "--tpu_name='$TPU_NAME': use lowercase letters, digits and hyphens, starting with a letter"
[[ -n $ZONE ]] || die_usage "--zone is required (e.g. --zone=europe-west4-a)"
[[ $ZONE =~ ^[a-z0-9-]+$ ]] || die_usage "--zone='$ZONE' is not a zone name"
if [[ -n $PROJECT && ! $PROJECT =~ ^[a-z0-9.:-]+$ ]]; then
  die_usage "--project='$PROJECT' is not a project id"
fi

GCLOUD_LOCATION=("--zone=$ZONE")
if [[ -n $PROJECT ]]; then
  GCLOUD_LOCATION+=("--project=$PROJECT")
fi

require_gcloud() {
  command -v gcloud >/dev/null 2>&1 ||
    die "gcloud is not on PATH: install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install) and run 'gcloud auth login', or use --dry_run to only print the commands"
}

resolve_project() {
  if [[ -z $PROJECT ]]; then
    if [[ $DRY_RUN == 1 ]]; then
      note "--project not given: gcloud's configured project is used"
      return 0
    fi
    print_cmd gcloud config get-value project
    PROJECT=$(gcloud config get-value project 2>/dev/null || true)
    [[ -n $PROJECT && $PROJECT != '(unset)' ]] ||
      die_usage "--project not given and gcloud has no configured project (gcloud config set project ID)"
    GCLOUD_LOCATION+=("--project=$PROJECT")
  fi
}

# ------------------------------------------------------------------ --delete

if [[ $DELETE == 1 ]]; then
  [[ $DRY_RUN == 1 ]] || require_gcloud
  resolve_project
  run gcloud compute tpus tpu-vm delete "$TPU_NAME" "${GCLOUD_LOCATION[@]}" --quiet
  exit 0
fi

# ---------------------------------------------------------- launch: checking

((${#GIN_FILES[@]} > 0)) || die_usage "--gin_file is required (at least one, e.g. --gin_file=gin/quickstart.gin)"
[[ -n $MODEL_DIR ]] || die_usage "--model_dir is required (a gs:// path)"
[[ $MODEL_DIR =~ ^gs://[^/]+ ]] ||
  die_usage "--model_dir='$MODEL_DIR' must be a gs:// path (gs://BUCKET/PATH): TPU training reads and writes Cloud Storage"
case $MODE in
  train | eval | train_and_eval) ;;
  *) die_usage "--mode='$MODE' must be train, eval or train_and_eval" ;;
esac
[[ $ACCELERATOR_TYPE =~ ^[a-z0-9-]+$ ]] ||
  die_usage "--accelerator_type='$ACCELERATOR_TYPE' is not an accelerator type (e.g. v3-8)"
[[ $RUNTIME_VERSION =~ ^[A-Za-z0-9._-]+$ ]] ||
  die_usage "--runtime_version='$RUNTIME_VERSION' is not a TPU software version"
if [[ $PREEMPTIBLE == 1 && $SPOT == 1 ]]; then
  die_usage "--preemptible and --spot exclude each other"
fi
for binding in ${GIN_PARAMS[@]+"${GIN_PARAMS[@]}"}; do
  [[ -n ${binding//[[:space:]]/} ]] || die_usage "--gin_param is empty"
done
for env in ${ENVS[@]+"${ENVS[@]}"}; do
  [[ $env =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die_usage "--env='$env' must be NAME=VALUE"
done
[[ -n $TF_TPU_PACKAGE ]] || die_usage "--tf_tpu_package is empty"
case $REPO_DIR_ON_VM in
  '' | '~' | '~/' | / | . | ./ | .. | ../)
    die_usage "--repo_dir_on_vm='$REPO_DIR_ON_VM': give a directory of its own, e.g. ~/official_repro" ;;
esac
if [[ /$REPO_DIR_ON_VM/ == */../* ]]; then
  die_usage "--repo_dir_on_vm='$REPO_DIR_ON_VM' must not contain '..'"
fi
REPO_DIR_ON_VM=${REPO_DIR_ON_VM%/}

# The repository root: the folder holding this script.
script_dir=${BASH_SOURCE[0]%/*}
[[ $script_dir == "${BASH_SOURCE[0]}" ]] && script_dir=.
REPO_ROOT=$(cd "$script_dir" && pwd -P)

# Gin files as the VM sees them: paths inside the repository.
REMOTE_GIN_FILES=()
for gin_file in "${GIN_FILES[@]}"; do
  [[ -n $gin_file ]] || die_usage "--gin_file is empty"
  if [[ $gin_file == gs://* ]]; then
    REMOTE_GIN_FILES+=("$gin_file")
    continue
  fi
  [[ -f $gin_file ]] || die_usage "--gin_file=$gin_file: no such file"
  case $gin_file in
    */*) gin_dir=${gin_file%/*} ;;
    *) gin_dir=. ;;
  esac
  [[ -n $gin_dir ]] || gin_dir=/
  gin_dir=$(cd "$gin_dir" && pwd -P)
  gin_abs=${gin_dir%/}/${gin_file##*/}
  [[ $gin_abs == "$REPO_ROOT"/* ]] ||
    die_usage "--gin_file=$gin_file is outside the repository $REPO_ROOT, so it would not be copied to the VM; move it into the repository or use a gs:// path"
  REMOTE_GIN_FILES+=("${gin_abs#"$REPO_ROOT"/}")
done

if [[ $DRY_RUN != 1 ]]; then
  require_gcloud
  command -v tar >/dev/null 2>&1 || die "tar is not on PATH"
  command -v git >/dev/null 2>&1 || die "git is not on PATH (it lists the files to copy)"
  git -C "$REPO_ROOT" rev-parse --git-dir >/dev/null 2>&1 ||
    die "$REPO_ROOT is not a git checkout (git lists the files to copy)"
fi
resolve_project

# ------------------------------------------------- launch: remote commands

q_repo=$(qpath "$REPO_DIR_ON_VM")
q_repo_new=$(qpath "$REPO_DIR_ON_VM.run_tpu_new")
q_marker=$(qpath "$REPO_DIR_ON_VM/.run_tpu_synced")
q_logdir=$(qpath "$LOG_DIR_ON_VM")
q_pidfile=$(qpath "$LOG_DIR_ON_VM/train.pid")
log_name=${MODEL_DIR#gs://}
log_name=${log_name%/}
log_name=${log_name//[^A-Za-z0-9._-]/_}.log
LOG_ON_VM=$LOG_DIR_ON_VM/$log_name
q_log=$(qpath "$LOG_ON_VM")
q_latest=$(qpath "$LOG_DIR_ON_VM/latest.log")

# Refuses to touch a VM whose previous run is still going.
busy_check="if [ -f $q_pidfile ] && kill -0 \"\$(cat $q_pidfile)\" 2>/dev/null; then echo \"run_tpu: training (pid \$(cat $q_pidfile)) is still running on \$(hostname); stop it first: kill \$(cat $q_pidfile)\" >&2; exit 1; fi"

# Replaces the repository copy; refuses to delete a folder it did not make.
sync_cmd="$busy_check; if [ -e $q_repo ] && [ ! -f $q_marker ]; then echo \"run_tpu: $REPO_DIR_ON_VM exists but was not made by run_tpu.sh; remove it or pass another --repo_dir_on_vm\" >&2; exit 1; fi; rm -rf $q_repo_new && mkdir -p $q_repo_new && tar -xzf ~/$REMOTE_TARBALL -C $q_repo_new && touch $q_repo_new/.run_tpu_synced && rm -rf $q_repo && mv $q_repo_new $q_repo && rm -f ~/$REMOTE_TARBALL"

# requirements.txt pulls in the CPU 'tensorflow' package (tf-keras,
# tensorflow-text and tf-models-official depend on it); the TPU build
# provides the same 'tensorflow' module, so it replaces it.
q_pkg=$(shq "$TF_TPU_PACKAGE")
q_links=$(shq "$TF_TPU_FIND_LINKS")
install_cmd="cd $q_repo && python3 -m pip install --upgrade pip && python3 -m pip install -r requirements.txt && python3 -m pip uninstall -y tensorflow && python3 -m pip install --force-reinstall --no-deps $q_pkg -f $q_links && python3 -m pip install $q_pkg -f $q_links"

train_words=()
if ((${#ENVS[@]} > 0)); then
  train_words+=(env "${ENVS[@]}")
fi
train_words+=(python3 -m official_repro.train)
for gin_file in "${REMOTE_GIN_FILES[@]}"; do
  train_words+=("--gin_file=$gin_file")
done
for binding in ${GIN_PARAMS[@]+"${GIN_PARAMS[@]}"}; do
  train_words+=("--gin_param=$binding")
done
train_words+=("--model_dir=$MODEL_DIR" "--mode=$MODE" --strategy=tpu --tpu=local)
train_cmd=
for word in "${train_words[@]}"; do
  train_cmd+="${train_cmd:+ }$(shq_word "$word")"
done

launch_cmd="mkdir -p $q_logdir || exit 1; $busy_check; cd $q_repo || exit 1; echo \"=== run_tpu: \$(date -u) starting\" >> $q_log; setsid nohup $train_cmd >> $q_log 2>&1 < /dev/null & echo \$! > $q_pidfile; ln -sfn $q_log $q_latest; echo \"run_tpu: training started on \$(hostname), pid \$(cat $q_pidfile), log $LOG_ON_VM\""

# ------------------------------------------------------------ launch: steps

ssh_cmd=(gcloud compute tpus tpu-vm ssh "$TPU_NAME" "${GCLOUD_LOCATION[@]}")

# 1. The TPU VM: reuse it or create it.
create_cmd=(gcloud compute tpus tpu-vm create "$TPU_NAME" "${GCLOUD_LOCATION[@]}"
  "--accelerator-type=$ACCELERATOR_TYPE" "--version=$RUNTIME_VERSION")
[[ $PREEMPTIBLE == 1 ]] && create_cmd+=(--preemptible)
[[ $SPOT == 1 ]] && create_cmd+=(--spot)
describe_cmd=(gcloud compute tpus tpu-vm describe "$TPU_NAME" "${GCLOUD_LOCATION[@]}"
  '--format=value(state,acceleratorType)')

if [[ $DRY_RUN == 1 ]]; then
  print_cmd "${describe_cmd[@]}"
  note "if the TPU VM does not exist:"
  print_cmd "${create_cmd[@]}"
else
  tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/run_tpu.XXXXXX")
  trap 'rm -rf "$tmp_dir"' EXIT
  print_cmd "${describe_cmd[@]}"
  if description=$("${describe_cmd[@]}" 2>"$tmp_dir/describe.err"); then
    read -r state existing_type _ <<<"$description" || true
    note "TPU VM $TPU_NAME exists: state ${state:-unknown}, accelerator ${existing_type:-unknown}"
    if [[ -n ${existing_type:-} && ${existing_type##*/} != "$ACCELERATOR_TYPE" ]]; then
      note "warning: it is a ${existing_type##*/}, not the --accelerator_type=$ACCELERATOR_TYPE asked for; reusing it"
    fi
    case ${state:-} in
      READY) ;;
      STOPPED) run gcloud compute tpus tpu-vm start "$TPU_NAME" "${GCLOUD_LOCATION[@]}" ;;
      *) die "TPU VM $TPU_NAME is in state '${state:-unknown}'; wait for it, or delete it with: $PROG --tpu_name=$TPU_NAME --zone=$ZONE --delete" ;;
    esac
  else
    describe_error=$(<"$tmp_dir/describe.err")
    if [[ $describe_error == *NOT_FOUND* || $describe_error == *"not found"* ]]; then
      run "${create_cmd[@]}"
    else
      printf '%s\n' "$describe_error" >&2
      die "could not look up TPU VM $TPU_NAME (gcloud compute tpus tpu-vm describe failed; see above)"
    fi
  fi
fi

# 2. Copy the repository to every worker.
tarball=${tmp_dir:-${TMPDIR:-/tmp}/run_tpu.XXXXXX}/$REMOTE_TARBALL
file_list=${tarball%/*}/files
print_cmd git -C "$REPO_ROOT" ls-files -z --cached --others --exclude-standard
note "... keeping the files present in the working tree, written NUL-separated to $file_list"
if [[ $DRY_RUN != 1 ]]; then
  : >"$file_list"
  git -C "$REPO_ROOT" ls-files -z --cached --others --exclude-standard >"$tmp_dir/listed"
  while IFS= read -r -d '' path; do
    if [[ -e $REPO_ROOT/$path || -L $REPO_ROOT/$path ]]; then
      printf '%s\0' "$path" >>"$file_list"
    fi
  done <"$tmp_dir/listed"
fi
run tar -C "$REPO_ROOT" --null -T "$file_list" -czf "$tarball"
run gcloud compute tpus tpu-vm scp "$tarball" "$TPU_NAME:$REMOTE_TARBALL" "${GCLOUD_LOCATION[@]}" --worker=all
run "${ssh_cmd[@]}" --worker=all "--command=$sync_cmd"

# 3. Install the requirements and TensorFlow's TPU build on every worker.
if [[ $SKIP_INSTALL == 1 ]]; then
  note "--skip_install: not running pip"
else
  run "${ssh_cmd[@]}" --worker=all "--command=$install_cmd"
fi

# 4. Start training, detached, on worker 0.
run "${ssh_cmd[@]}" --worker=0 "--command=$launch_cmd"

location_flags=
for word in "${GCLOUD_LOCATION[@]}"; do
  location_flags+=" $(shq "$word")"
done
follow="gcloud compute tpus tpu-vm ssh $(shq "$TPU_NAME")$location_flags --worker=0"
emit <<EOF

Training runs detached on $TPU_NAME (worker 0). Follow its log with:
  $follow --command=$(shq "tail -n 200 -f $q_log")
Stop it with:
  $follow --command=$(shq "kill \$(cat $q_pidfile)")
TensorBoard:
  tensorboard --logdir=$(shq "$MODEL_DIR")
Delete the TPU VM when done (it is billed while it exists):
  bash $(shq "$0") --tpu_name=$(shq "$TPU_NAME") --zone=$(shq "$ZONE")${PROJECT:+ --project=$(shq "$PROJECT")} --delete
EOF
