# bash completion for silvic-ring(1): the commands, each command's long
# options and, for an option that takes a FILE (or an address SOURCE,
# often a file), file names.  The options come from the command's own
# `silvic-ring help COMMAND`, so they never go stale; the completion needs
# nothing but bash (not the bash-completion package).
# Installed as share/bash-completion/completions/silvic-ring; by hand:
#     source completions/silvic-ring.bash

_silvic_ring_commands="run launch bench serve help"

# Prints "OPTION METAVAR" for each option, short and long, in `PROG help
# CMD` (METAVAR "-" when it takes no value); cached per program and command.
_silvic_ring_options() {
	local prog=$1 cmd=$2 key var
	key=$(printf '%s' "$prog:$cmd" | cksum | cut -d' ' -f1)
	var=_silvic_ring_cache_$key
	if [ -z "${!var+set}" ]; then
		printf -v "$var" '%s' "$("$prog" help "$cmd" 2>/dev/null |
			sed -n -E 's/^ +(-[A-Za-z0-9])?(, )?(--[a-z0-9_-]+)?( ([A-Z0-9][][A-Z0-9:|@_]*))?(  .*)?$/\1 \3 \5/p' |
			awk 'NF == 0 { next } { v = NF == 3 ? $3 : "-"
			       if ($1 ~ /^--/) { v = NF == 2 ? $2 : "-"; print $1, v; next }
			       print $1, v; if ($2 ~ /^--/) print $2, v }' | sort -u)"
	fi
	printf '%s\n' "${!var}"
}

_silvic_ring() {
	local cur prev prog cmd i word opts metavar top=
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	prog=${COMP_WORDS[0]}
	[ "${prog#\~/}" != "$prog" ] && prog=$HOME/${prog#\~/}

	# The command is the first word that is not an option; after
	# `launch -n N` the launched command is the one that counts.
	cmd= i=1
	while [ "$i" -lt "$COMP_CWORD" ]; do
		word=${COMP_WORDS[i]}
		case $word in
		launch) cmd=launch ;;
		-n | --ranks | --grace | -H | --hosts | --hostfile | --ssh | \
			--remote-path | --fanout | --connect-timeout | --keepalive | \
			--launcher-address)
			[ "$cmd" = launch ] && i=$((i + 1)) ;;
		--) ;;
		-*) ;;
		*)
			if [ -z "$cmd" ] || [ "$cmd" = launch ]; then
				case " $_silvic_ring_commands " in
				*" $word "*) cmd=$word ;;
				esac
			fi ;;
		esac
		i=$((i + 1))
	done

	if [ -z "$cmd" ] && [[ $cur != -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$_silvic_ring_commands" -- "$cur")
		return
	fi
	case $cmd in
	help)
		mapfile -t COMPREPLY < <(compgen -W "run launch bench serve" -- "$cur")
		return ;;
	launch)
		# After an option of launch's own that takes a value, the value.
		case $prev in
		-n | --ranks | --grace | -H | --hosts | --hostfile | --ssh | \
			--remote-path | --fanout | --connect-timeout | --keepalive | \
			--launcher-address) ;;
		*)
			if [[ $cur != -* ]]; then
				mapfile -t COMPREPLY < <(compgen -W "run bench serve" -- "$cur")
				return
			fi ;;
		esac ;;
	"") cmd=run top=--version ;;
	esac

	opts=$(_silvic_ring_options "$prog" "$cmd")
	metavar=$(printf '%s\n' "$opts" | awk -v o="$prev" '$1 == o { print $2 }')
	case $metavar in
	FILE | SOURCE)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return ;;
	TYPE)
		mapfile -t COMPREPLY < <(compgen -W "f32 f64 i64 i32 all" -- "$cur")
		return ;;
	OP)
		mapfile -t COMPREPLY < <(compgen -W "sum max min prod all" -- "$cur")
		return ;;
	"" | -) ;;
	*) return ;;	# a value nobody can guess: a number, a host, a name
	esac
	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(printf '%s\n' "$opts" |
			awk '$1 ~ /^--/ { print $1 }') $top" -- "$cur")
	elif [ "$cmd" = bench ]; then
		mapfile -t COMPREPLY < <(compgen -W "allreduce allgather broadcast links all" -- "$cur")
	fi
}

complete -F _silvic_ring silvic-ring
