# bash completion for ckpt(1).  Installed as
# $datadir/bash-completion/completions/ckpt; or: source doc/ckpt.bash
#
# Commands and each command's options are read from `ckpt --help` and
# `ckpt COMMAND --help`, so they never fall out of step with the program.

_ckpt_commands()
{
    "$1" --help 2>/dev/null | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z0-9-]*\)  .*/\1/p'
}

_ckpt_options()
{
    "$1" "$2" --help 2>/dev/null | grep -oE '(^|[ ,[])--[a-z][a-z0-9-]*' | tr -d ' ,[' | sort -u
    "$1" --help 2>/dev/null | grep -oE '^  --max-[a-z-]+' | tr -d ' '
}

_ckpt()
{
    local cur prev prog cmd i
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    prog=${COMP_WORDS[0]}
    cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -*) ;;
        *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W '--help --version' -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$(_ckpt_commands "$prog")" -- "$cur"))
        fi
        return
    fi
    case $prev in
    -d|--dir)
        COMPREPLY=($(compgen -d -- "$cur"))
        return ;;
    -o|--output)
        COMPREPLY=($(compgen -f -- "$cur"))
        return ;;
    --key|--filter|--max-*)
        return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_ckpt_options "$prog" "$cmd")" -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}

complete -o filenames -F _ckpt ckpt
