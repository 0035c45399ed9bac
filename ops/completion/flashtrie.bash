# flashtrie.bash - bash completion for flashtrie (installed by "cmake
# --install" as share/bash-completion/completions/flashtrie).
#
# It reads the commands from "flashtrie --help" and a command's options from
# "flashtrie COMMAND [SUB] --help" when asked, so it follows the program it
# completes: no list here to keep in sync.  Option values it knows (engine,
# format, log level and a few more) are offered; other values complete as
# file names.

_flashtrie_commands()
{
    "$1" --help 2>/dev/null |
        sed -n '/^commands:$/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'
}

_flashtrie()
{
    local prog cur prev cmd sub i
    prog=${COMP_WORDS[0]}
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    if [ "$COMP_CWORD" -eq 1 ]; then
        local words
        words="$(_flashtrie_commands "$prog") --help --version -h -V"
        mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
        return 0
    fi
    cmd=${COMP_WORDS[1]}
    if [ "$cmd" = help ]; then
        [ "$COMP_CWORD" -eq 2 ] &&
            mapfile -t COMPREPLY < <(compgen -W "$(_flashtrie_commands "$prog")" -- "$cur")
        return 0
    fi
    # A subcommand (gen keys|index|requests): from the usage line.
    local subs
    subs=$("$prog" "$cmd" --help 2>/dev/null |
        sed -n "1s/^usage: flashtrie $cmd \([a-z]*\(|[a-z]*\)\{1,\}\) .*/\1/p" | tr '|' ' ')
    sub=
    if [ -n "$subs" ]; then
        if [ "$COMP_CWORD" -eq 2 ]; then
            mapfile -t COMPREPLY < <(compgen -W "$subs" -- "$cur")
            return 0
        fi
        sub=${COMP_WORDS[2]}
    fi

    case $prev in
        --engine)
            if [ "$cmd" = bench ]; then
                mapfile -t COMPREPLY < <(compgen -W "cpu gpu cpu,gpu" -- "$cur")
            elif [ "$cmd" = serve ] || [ "$cmd" = check-config ]; then
                mapfile -t COMPREPLY < <(compgen -W "auto cpu gpu shards" -- "$cur")
            else
                mapfile -t COMPREPLY < <(compgen -W "auto cpu gpu" -- "$cur")
            fi
            return 0 ;;
        --format)
            if [ "$cmd" = build ]; then
                mapfile -t COMPREPLY < <(compgen -W "auto text ftk" -- "$cur")
            else
                mapfile -t COMPREPLY < <(compgen -W "text ftk" -- "$cur")
            fi
            return 0 ;;
        --log-level)
            mapfile -t COMPREPLY < <(compgen -W "error warn info debug" -- "$cur")
            return 0 ;;
        --exchange)
            mapfile -t COMPREPLY < <(compgen -W "forest kernel device nccl nccl-device" -- "$cur")
            return 0 ;;
        --launch)
            mapfile -t COMPREPLY < <(compgen -W "graph plain" -- "$cur")
            return 0 ;;
        --prefetch)
            mapfile -t COMPREPLY < <(compgen -W "on off" -- "$cur")
            return 0 ;;
    esac

    if [[ $cur == -* ]]; then
        local opts
        # shellcheck disable=SC2086
        opts=$("$prog" "$cmd" $sub --help 2>/dev/null |
            grep -o -- '--[a-z0-9][a-z0-9-]*' | sort -u)
        mapfile -t COMPREPLY < <(compgen -W "$opts --help --version" -- "$cur")
        return 0
    fi
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    return 0
}

complete -o filenames -o bashdefault -F _flashtrie flashtrie
