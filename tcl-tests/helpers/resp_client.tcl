# A small RESP client for the protocol tests.
#
# Every socket is non-blocking and every wait goes through the event loop with
# a deadline, so a server that hangs fails the test instead of the suite.
# Values are byte strings (chars 0-255); the channel is binary.
#
#   set c [resp_client 127.0.0.1 22001]   ;# returns a command name
#   $c set k v                  ;# send one command, read the plain reply
#   $c send set k v ; $c flush  ;# pipelining: queue, then read with $c read
#   $c read / $c read_typed     ;# one reply: plain value / {type value}
#   $c write $bytes             ;# raw bytes, flushed (malformed input tests)
#   $c wait_closed              ;# 1 if the server closes within the timeout
#   $c timeout ms / $c fd / $c close
#
# Plain replies: status/bulk/int/double/bignum/verbatim as strings, nil as "",
# bool as 0/1, arrays/sets/pushes as lists, maps as flat dict lists. An error
# reply raises a Tcl error whose message is the error text (as in Redis's
# test suite), so assert_error works on it.

namespace eval resp {
    variable next_id 0
    variable read_chunk 65536
}

proc resp_client {host port {timeout_ms 0}} {
    if {$timeout_ms == 0} { set timeout_ms [scaled_ms 10000] }
    set fd [socket -async $host $port]
    fconfigure $fd -blocking 0 -translation binary -buffering full \
        -buffersize 262144
    set deadline [expr {[clock milliseconds] + $timeout_ms}]
    if {[catch {resp::wait_event $fd writable $deadline} err]} {
        close $fd
        error "connect to $host:$port: $err"
    }
    set sockerr [fconfigure $fd -error]
    if {$sockerr ne ""} {
        close $fd
        error "connect to $host:$port: $sockerr"
    }
    set name ::resp::client[incr resp::next_id]
    upvar #0 $name st
    array set st [list fd $fd buf "" pos 0 timeout $timeout_ms]
    proc $name {args} "resp::dispatch $name {*}\$args"
    return $name
}

namespace eval resp {

proc dispatch {name sub args} {
    upvar #0 $name st
    switch -- $sub {
        send    { write_cmd $st(fd) $args; return }
        flush   { flush $st(fd); return }
        read    { return [plain [read_typed $name] 1] }
        read_typed { return [read_typed $name] }
        write   { puts -nonewline $st(fd) [lindex $args 0]; flush $st(fd); return }
        wait_flushed { wait_flushed $name; return }
        wait_closed { return [wait_closed $name {*}$args] }
        timeout { set st(timeout) [lindex $args 0]; return }
        fd      { return $st(fd) }
        close   { close_client $name; return }
        typed   {
            write_cmd $st(fd) $args
            flush $st(fd)
            return [read_typed $name]
        }
        default {
            write_cmd $st(fd) [linsert $args 0 $sub]
            flush $st(fd)
            return [plain [read_typed $name] 1]
        }
    }
}

proc close_client {name} {
    upvar #0 $name st
    catch {close $st(fd)}
    rename $name {}
    unset st
}

# One command as a RESP multibulk; the payloads go to the channel as they
# are, so a 100 MiB value is never copied into a bigger string.
proc write_cmd {fd argv} {
    puts -nonewline $fd "*[llength $argv]\r\n"
    foreach a $argv {
        puts -nonewline $fd "\$[string length $a]\r\n"
        puts -nonewline $fd $a
        puts -nonewline $fd "\r\n"
    }
}

# Waits for a channel event before a deadline (ms clock).
proc wait_event {fd event deadline} {
    variable ready
    set left [expr {$deadline - [clock milliseconds]}]
    if {$left <= 0} { error "timeout" }
    set ready($fd) ""
    fileevent $fd $event [list set ::resp::ready($fd) ok]
    set timer [after $left [list set ::resp::ready($fd) timeout]]
    vwait ::resp::ready($fd)
    after cancel $timer
    catch {fileevent $fd $event {}}
    set r $ready($fd)
    unset ready($fd)
    if {$r eq "timeout"} { error "timeout" }
}

proc deadline {name} {
    upvar #0 $name st
    return [expr {[clock milliseconds] + $st(timeout)}]
}

# Reads more bytes into the line buffer (at most one chunk).
proc fill {name deadline} {
    upvar #0 $name st
    variable read_chunk
    while 1 {
        if {[catch {read $st(fd) $read_chunk} data]} {
            error "connection error: $data"
        }
        if {[string length $data]} {
            # Drop the consumed prefix now and then to keep the buffer small.
            if {$st(pos) > 65536} {
                set st(buf) [string range $st(buf) $st(pos) end]
                set st(pos) 0
            }
            append st(buf) $data
            return
        }
        if {[eof $st(fd)]} { error "connection closed by server" }
        if {[catch {wait_event $st(fd) readable $deadline}]} {
            error "timeout waiting for the server's reply"
        }
    }
}

proc read_line {name deadline} {
    upvar #0 $name st
    while {[set nl [string first "\r\n" $st(buf) $st(pos)]] < 0} {
        fill $name $deadline
    }
    set line [string range $st(buf) $st(pos) [expr {$nl - 1}]]
    set st(pos) [expr {$nl + 2}]
    return $line
}

# Reads exactly n bytes: what is buffered, then straight from the socket so a
# big payload never goes through the line buffer.
proc read_bytes {name n deadline} {
    upvar #0 $name st
    set have [expr {[string length $st(buf)] - $st(pos)}]
    if {$have >= $n} {
        set out [string range $st(buf) $st(pos) [expr {$st(pos) + $n - 1}]]
        incr st(pos) $n
        return $out
    }
    # A byte array from the start: appending the socket's byte arrays then
    # keeps it one (appending to a string would convert every chunk).
    set out [binary format a* [string range $st(buf) $st(pos) end]]
    set st(buf) ""
    set st(pos) 0
    while {[set need [expr {$n - [string length $out]}]] > 0} {
        if {[catch {read $st(fd) $need} data]} {
            error "connection error: $data"
        }
        if {[string length $data]} { append out $data; continue }
        if {[eof $st(fd)]} { error "connection closed by server mid-reply" }
        if {[catch {wait_event $st(fd) readable $deadline}]} {
            error "timeout reading a $n byte payload"
        }
    }
    return $out
}

proc read_typed {name} {
    return [read_reply $name [deadline $name]]
}

proc read_count {line} {
    set n [string range $line 1 end]
    if {![string is wide -strict $n]} { error "bad length in reply line: $line" }
    return $n
}

# One reply as {type value}; aggregate values are lists of typed replies.
proc read_reply {name deadline} {
    set line [read_line $name $deadline]
    set rest [string range $line 1 end]
    switch -- [string index $line 0] {
        + { return [list status $rest] }
        - { return [list error $rest] }
        : { return [list int $rest] }
        , { return [list double $rest] }
        ( { return [list bignum $rest] }
        # { return [list bool [expr {$rest eq "t"}]] }
        _ { return [list nil ""] }
        $ - ! - = {
            set n [read_count $line]
            if {$n < 0} { return [list nil ""] }
            set data [read_bytes $name [expr {$n + 2}] $deadline]
            if {[string range $data end-1 end] ne "\r\n"} {
                error "bulk reply not followed by CRLF"
            }
            set data [string range $data 0 end-2]
            switch -- [string index $line 0] {
                $ { return [list bulk $data] }
                ! { return [list error $data] }
                = { return [list verbatim [string range $data 4 end]] }
            }
        }
        * - ~ - > - % - | {
            set n [read_count $line]
            if {$n < 0} { return [list nil ""] }
            set kind [dict get {* array ~ set > push % map | attr} \
                          [string index $line 0]]
            if {$kind in {map attr}} { set n [expr {$n * 2}] }
            set items {}
            for {set i 0} {$i < $n} {incr i} {
                lappend items [read_reply $name $deadline]
            }
            # An attribute decorates the reply that follows it.
            if {$kind eq "attr"} { return [read_reply $name $deadline] }
            return [list $kind $items]
        }
        default { error "unknown RESP type in reply line: [string range $line 0 60]" }
    }
}

# Typed reply to a plain Tcl value; a top-level error reply raises.
proc plain {typed {top 0}} {
    lassign $typed type value
    switch -- $type {
        error { if {$top} { error $value } ; return $value }
        array - set - push - map {
            set out {}
            foreach item $value { lappend out [plain $item] }
            return $out
        }
        default { return $value }
    }
}

proc wait_flushed {name} {
    upvar #0 $name st
    set deadline [deadline $name]
    flush $st(fd)
    while {[chan pending output $st(fd)] > 0} {
        if {[clock milliseconds] > $deadline} { error "timeout flushing output" }
        esleep 5
    }
}

# 1 if the server closes the connection before the timeout; bytes that arrive
# first are discarded (the caller has already read the reply it wanted).
proc wait_closed {name {timeout_ms 0}} {
    upvar #0 $name st
    if {$timeout_ms == 0} { set timeout_ms $st(timeout) }
    set deadline [expr {[clock milliseconds] + $timeout_ms}]
    while 1 {
        if {[catch {read $st(fd) 65536} data]} { return 1 }
        if {$data ne ""} continue
        if {[eof $st(fd)]} { return 1 }
        if {[catch {wait_event $st(fd) readable $deadline}]} { return 0 }
    }
}

}
