# Starting and stopping servers under test.
#
#   start_server {options} {body}
#     options (a dict): args {extra flags}  segment-size 256MB
#                       kind moonkv|cluster|redis   (redis = a real
#                       redis-server; cluster = a master, two nodes of
#                       segment-size each and a gateway that gets args)
#   Inside body: r <cmd> ... (a lazily opened default client), srv port,
#   srv host, srv log, srv pid, new_client (another client to this server).
#
# The server runs under a small sh wrapper that records its exit status in
# the log, so a crash or a sanitizer exit code is seen when it stops.

namespace eval srv {
    variable stack {}
    variable ports {}
    variable next_port 0
    variable seq 0
    variable sanitizer_re {ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer}
}

proc srv::port_free {port} {
    if {[catch {socket -server {apply {{args} {}}} -myaddr 127.0.0.1 $port} s]} {
        return 0
    }
    close $s
    return 1
}

# Our ports: blocks of tests/support/ports.py (the C tests' h_free_ports
# blocks and locks), held by that helper for as long as its pipe to us is
# open, so suites running side by side never share one.
proc srv::take_ports {blocks} {
    variable ports
    set holder [open [list |python3 [file join $::tt::root tests support ports.py] $blocks 2>@stderr] r+]
    foreach base [gets $holder] {
        for {set p $base} {$p < $base + 32} {incr p} { lappend ports $p }
    }
    if {![llength $ports]} { error "tests/support/ports.py gave no ports" }
}

# Next free port of ours, round robin.
proc srv::pick_port {} {
    variable next_port
    variable ports
    if {![llength $ports]} { take_ports 4 }
    for {set i 0} {$i < [llength $ports]} {incr i} {
        set port [lindex $ports [expr {$next_port % [llength $ports]}]]
        incr next_port
        if {[port_free $port]} { return $port }
    }
    error "no free port of ours: $ports"
}

proc srv::alive {pid} {
    if {[catch {open /proc/$pid/stat r} f]} { return 0 }
    # The process can exit between the open and the read (ESRCH): gone.
    set failed [catch {read $f} stat]
    catch {close $f}
    if {$failed} { return 0 }
    # The state follows the parenthesised command name; Z is a dead child.
    set state [lindex [string range $stat [expr {[string last ")" $stat] + 2}] end] 0]
    return [expr {$state ne "Z" && $state ne "X"}]
}

proc srv::opt {opts name default} {
    return [expr {[dict exists $opts $name] ? [dict get $opts $name] : $default}]
}

# kind: moonkv (standalone), redis, or a cluster part: master, node
# (opts master, data-port) or gateway (opts master).
proc srv::command_line {kind port opts} {
    set extra [opt $opts args {}]
    set seg [opt $opts segment-size 256MB]
    set moonkv [list $::tt::server_path --bind 127.0.0.1 --port $port]
    switch -- $kind {
        redis {
            return [list redis-server --port $port --bind 127.0.0.1 --save "" \
                        --appendonly no {*}$extra]
        }
        master { return [list {*}$moonkv --role master] }
        node {
            return [list {*}$moonkv --role node --master [dict get $opts master] \
                        --segment-size $seg --data-addrs 127.0.0.1:[dict get $opts data-port] \
                        --segment-persist no --prefault no]
        }
        gateway { return [list {*}$moonkv --role gateway --master [dict get $opts master] {*}$extra] }
        default { return [list {*}$moonkv --segment-size $seg --prefault no {*}$extra] }
    }
}

proc srv::log_dir {} {
    set dir [file join $::tt::root build test-logs]
    file mkdir $dir
    return $dir
}

# A cluster: its master, two nodes and the gateway the tests talk to.
# The gateway's dict lists the others under parts (stopped after it).
proc srv::launch_cluster {opts} {
    set m [launch master $opts]
    set parts [list $m]
    set master 127.0.0.1:[dict get $m port]
    if {[catch {
        for {set i 0} {$i < 2} {incr i} {
            lappend parts [launch node [dict merge $opts [list master $master data-port [pick_port]]]]
        }
        wait_nodes_alive [dict get $m port] 2
        set g [launch gateway [dict merge $opts [list master $master]]]
    } err]} {
        foreach p $parts { stop $p }
        error $err
    }
    return [dict set g parts $parts]
}

# Until the master at port counts n alive nodes (INFO cluster), bounded.
proc srv::wait_nodes_alive {port n} {
    set c [resp_client 127.0.0.1 $port]
    set deadline [expr {[clock milliseconds] + [scaled_ms 15000]}]
    set alive 0
    while {[clock milliseconds] < $deadline} {
        regexp {nodes_alive:(\d+)} [$c INFO cluster] -> alive
        if {$alive >= $n} break
        esleep 50
    }
    $c close
    if {$alive < $n} { error "only $alive of $n nodes alive on the master at port $port" }
}

proc srv::launch {kind opts} {
    if {$kind eq "cluster"} { return [launch_cluster $opts] }
    variable seq
    set port [pick_port]
    set log [file join [log_dir] "tcl-[file rootname $::tt::file]-[incr seq]-$port.log"]
    set pidfile $log.pid
    file delete $pidfile
    set cmd [command_line $kind $port $opts]
    set fh [open $log w]
    puts $fh "\[harness\] [join $cmd]"
    close $fh
    # The wrapper writes the server's pid, waits for it and logs its status.
    set script {"$@" >>"$LOG" 2>&1 & p=$!; echo $p >"$LOG.pid"; wait $p; echo "[harness] exit status $?" >>"$LOG"}
    set ::env(LOG) $log
    set wrapper [exec sh -c $script sh {*}$cmd &]
    unset ::env(LOG)
    set deadline [expr {[clock milliseconds] + [scaled_ms 15000]}]
    set pid ""
    while {[clock milliseconds] < $deadline} {
        if {$pid eq "" && [file exists $pidfile]} {
            set f [open $pidfile r]; set pid [string trim [read $f]]; close $f
        }
        if {$pid ne "" && ![alive $pid]} { break }
        if {$pid ne "" && ![catch {socket 127.0.0.1 $port} s]} {
            close $s
            return [dict create kind $kind port $port host 127.0.0.1 log $log \
                        pid $pid wrapper $wrapper client "" log_seen 0 dead 0]
        }
        esleep 20
    }
    catch {exec kill -KILL $pid}
    error "server did not start on port $port (see $log): [log_tail $log]"
}

proc srv::log_tail {log {lines 5}} {
    if {[catch {open $log r} f]} { return "" }
    set text [read $f]
    close $f
    return [join [lrange [split [string trim $text] \n] end-[expr {$lines - 1}] end] " | "]
}

proc srv::read_log {log} {
    set f [open $log r]
    fconfigure $f -translation binary
    set text [read $f]
    close $f
    return $text
}

# Stops the server (a cluster's gateway first, then its master, then its
# nodes: a node stopped under a live master would first wait for its
# objects to be moved away) with SIGTERM and returns "" or what went
# wrong.
proc srv::stop {s} {
    set problem [stop_one $s]
    if {[dict exists $s parts]} {
        foreach p [dict get $s parts] {
            set more [stop_one $p]
            if {$more ne ""} { append problem " [dict get $p kind]: $more" }
        }
    }
    return [string trim $problem]
}

proc srv::stop_one {s} {
    set pid [dict get $s pid]
    if {![alive $pid]} {
        set problem "server crashed"
    } else {
        set problem ""
        catch {exec kill -TERM $pid}
        set deadline [expr {[clock milliseconds] + [scaled_ms 10000]}]
        while {[alive $pid] && [clock milliseconds] < $deadline} { esleep 20 }
        if {[alive $pid]} {
            catch {exec kill -KILL $pid}
            set problem "server did not exit within 10 s of SIGTERM"
        }
    }
    # Give the wrapper time to log the exit status.
    set deadline [expr {[clock milliseconds] + 2000}]
    while {[alive [dict get $s wrapper]] && [clock milliseconds] < $deadline} { esleep 10 }
    set text [read_log [dict get $s log]]
    if {[regexp {\[harness\] exit status (\d+)} $text -> status] && $status != 0} {
        if {$problem eq ""} { set problem "server exited with status $status" }
        append problem " (status $status)"
    }
    variable sanitizer_re
    if {[regexp -line "^.*($sanitizer_re).*\$" $text line]} {
        append problem " sanitizer report: [string range $line 0 200]"
    }
    if {$problem ne ""} { append problem " (log: [dict get $s log])" }
    return [string trim $problem]
}

# Called after every test: a dead server or a new sanitizer report in its
# log fails the test that was running.
proc srv_health_problem {} {
    if {[llength $::srv::stack] == 0} { return "" }
    set s [lindex $::srv::stack end]
    if {[dict get $s dead]} { return "" }
    set problem ""
    set all [list $s]
    if {[dict exists $s parts]} { lappend all {*}[dict get $s parts] }
    foreach p $all {
        if {![srv::alive [dict get $p pid]]} {
            set problem "[dict get $p kind] crashed (log: [dict get $p log]: [srv::log_tail [dict get $p log] 3])"
        } else {
            set text [srv::read_log [dict get $p log]]
            if {[regexp -line "^.*($::srv::sanitizer_re).*\$" $text line]} {
                set problem "sanitizer report in [dict get $p log]: $line"
            }
        }
        if {$problem ne ""} break
    }
    if {$problem ne ""} {
        lset ::srv::stack end [dict set s dead 1]
    }
    return $problem
}

proc srv {what} {
    set s [lindex $::srv::stack end]
    return [dict get $s $what]
}

proc new_client {{timeout_ms 0}} {
    return [resp_client [srv host] [srv port] $timeout_ms]
}

# The default client of the innermost server, reopened if a test closed it.
proc r {args} {
    set s [lindex $::srv::stack end]
    set c [dict get $s client]
    if {$c eq "" || [info commands $c] eq ""} {
        set c [new_client]
        lset ::srv::stack end [dict set s client $c]
    }
    return [$c {*}$args]
}

proc reset_client {} {
    set s [lindex $::srv::stack end]
    set c [dict get $s client]
    if {$c ne "" && [info commands $c] ne ""} { $c close }
    lset ::srv::stack end [dict set s client ""]
}

proc start_server {opts body} {
    set kind [expr {[dict exists $opts kind] ? [dict get $opts kind] : $::tt::server_kind}]
    if {[catch {srv::launch $kind $opts} s]} {
        tt::report 0 "start_server" $s
        return
    }
    lappend ::srv::stack $s
    set code [catch {uplevel 1 $body} err opts2]
    set s [lindex $::srv::stack end]
    set ::srv::stack [lrange $::srv::stack 0 end-1]
    if {[dict get $s client] ne "" && [info commands [dict get $s client]] ne ""} {
        [dict get $s client] close
    }
    if {$code == 1} {
        tt::report 0 "error outside a test" "$err ([tt::where $opts2])"
    }
    set problem [srv::stop $s]
    tt::report [expr {$problem eq ""}] "$kind server on port [dict get $s port] stopped cleanly" $problem
}
